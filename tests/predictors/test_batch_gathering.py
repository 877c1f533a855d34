"""Gathering (predictors/merging.py `Merger._gathered`): once requests have come concurrently, a
call that finds the model idle yields the GIL once before it runs, and the requests that reached
the queue meanwhile share its model call; with no sign of concurrency it runs at once without
yielding, and GATHER_WINDOW_S after the last sign it stops yielding.

The yield is replaced by a function the test controls (`merging.time.sleep`) and the merger's
clock by a value the test sets, so no timing decides anything: "another request arrives during
the yield" is a thread the fake yield starts and waits for until it is queued.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from predictors import batching, merging
from tests.kit.mergekit import Recorder, queue_behind_busy_call


class Clock:
    """A merger's clock that reads what the test sets."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _batcher(recorder: Recorder, clock: Clock | None = None) -> batching.Batcher:
    batcher = batching.Batcher(recorder)
    batcher.clock = clock or Clock()
    return batcher


class Yields:
    """A stand-in for `time.sleep` in merging.py: counts zero-second yields and runs `during`
    (once) inside the first one."""

    def __init__(self) -> None:
        self.count = 0
        self.during: Callable[[], None] | None = None

    def sleep(self, seconds: float) -> None:
        assert seconds == 0
        self.count += 1
        if self.during is not None:
            during, self.during = self.during, None
            during()


@pytest.fixture
def yields(monkeypatch: pytest.MonkeyPatch) -> Yields:
    fake = Yields()

    class FakeTime:
        sleep = staticmethod(fake.sleep)

    monkeypatch.setattr(merging, "time", FakeTime)
    return fake


def _arrive_during_yield(batcher: batching.Batcher, instances: list[Any],
                         results: dict[str, Any]) -> Callable[[], None]:
    """What runs inside the yield: another request reaches the queue (its thread is left
    waiting there for the gathering call)."""

    def arrive() -> None:
        def run() -> None:
            results["joined"] = batcher.predict(instances)

        thread = threading.Thread(target=run)
        results["thread"] = thread
        thread.start()
        deadline = time.monotonic() + 30
        while batcher.queued() < 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert batcher.queued() == 1

    return arrive


def test_an_idle_model_without_concurrent_requests_runs_at_once(yields: Yields) -> None:
    recorder = Recorder()
    recorder.gate.set()
    batcher = _batcher(recorder)
    for i in range(5):
        assert batcher.predict([[i, 1]]) == [i + 1]
    assert yields.count == 0 and batcher.merged_calls == 0
    assert recorder.calls == [[[i, 1]] for i in range(5)]


def test_after_a_queue_an_idle_call_gathers_what_arrives_while_it_yields(yields: Yields) -> None:
    recorder = Recorder()
    batcher = _batcher(recorder)
    # Concurrency seen: two requests queued behind a call in flight (merged at its end).
    queue_behind_busy_call(batcher, recorder, [[[1, 1]], [[2, 2]], [[3, 3]]])
    assert batcher.merged_calls == 1 and yields.count == 0
    recorder.calls.clear()
    results: dict[str, Any] = {}
    yields.during = _arrive_during_yield(batcher, [[5, 5]], results)
    assert batcher.predict([[4, 4]]) == [8]
    results["thread"].join(30)
    assert results["joined"] == [10]
    assert yields.count == 1
    assert recorder.calls == [[[4, 4], [5, 5]]]  # one model call for both, this call's rows first
    assert batcher.merged_calls == 2 and not batcher._busy


def test_gathering_stops_once_the_window_after_the_last_queue_has_passed(yields: Yields) -> None:
    recorder = Recorder()
    clock = Clock(100.0)
    batcher = _batcher(recorder, clock)
    queue_behind_busy_call(batcher, recorder, [[[1, 1]], [[2, 2]]])  # concurrency seen at 100.0
    clock.now = 100.0 + merging.GATHER_WINDOW_S / 2
    assert batcher.predict([[3, 0]]) == [3]
    assert yields.count == 1  # within the window: yielded (nothing joined: no new sign)
    clock.now = 100.0 + merging.GATHER_WINDOW_S * 1.5
    for i in range(3):
        assert batcher.predict([[i, 0]]) == [i]
    assert yields.count == 1  # past it: straight through again


def test_a_joined_request_of_another_layout_waits_for_the_next_call(yields: Yields) -> None:
    recorder = Recorder()
    batcher = _batcher(recorder)
    queue_behind_busy_call(batcher, recorder, [[[1, 1]], [[2, 2]]])
    recorder.calls.clear()
    results: dict[str, Any] = {}
    yields.during = _arrive_during_yield(batcher, [[7, 7, 7]], results)  # another row length
    assert batcher.predict([[4, 4]]) == [8]
    results["thread"].join(30)
    assert results["joined"] == [21]
    assert recorder.calls == [[[4, 4]], [[7, 7, 7]]]  # not merged: run after, alone


def test_a_failing_gathered_call_gives_each_request_its_own_answer(yields: Yields) -> None:
    def inner(rows: list[Any]) -> list[Any]:
        if any(row == ["bad"] for row in rows):
            raise ValueError("bad row")
        return [sum(row) for row in rows]

    recorder = Recorder(inner)
    batcher = _batcher(recorder)
    queue_behind_busy_call(batcher, recorder, [[[1, 1]], [[2, 2]]])
    results: dict[str, Any] = {}

    def arrive_bad() -> None:
        def run() -> None:
            try:
                results["joined"] = batcher.predict([["bad"]])
            except ValueError as exc:
                results["joined"] = exc

        results["thread"] = threading.Thread(target=run)
        results["thread"].start()
        deadline = time.monotonic() + 30
        while batcher.queued() < 1 and time.monotonic() < deadline:
            time.sleep(0.001)

    yields.during = arrive_bad
    assert batcher.predict([[4, 4]]) == [8]
    results["thread"].join(30)
    assert isinstance(results["joined"], ValueError)
