"""An orphaned task seen by several task runners at once (registry/tasks.py), on any store: the
race tests/registry/test_tasks.py runs on SQLite and test_store_postgres.py on PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from registry import tasks
from registry.store import Store

RUNS: list[str] = []
FINISHED: list[tuple[str, str]] = []
_LOCK = threading.Lock()


def _work(context: Any, task: tasks.Task) -> str:
    with _LOCK:
        RUNS.append(task.name)
    time.sleep(0.2)  # long enough for the other runners to try their luck meanwhile
    return str(context)


def _finish(context: Any, task: tasks.Task, result: Any, error: Any) -> None:
    FINISHED.append((task.name, result))


def _runner(store: Store, context: Any) -> tasks.TaskRunner:
    runner = tasks.TaskRunner(store, context)
    runner.register("TEST_COUNTED", _work, _finish)
    return runner


def adopt_orphan_race(make_store: Callable[[], Store]) -> None:
    """An orphaned task seen by 4 runners at the same moment, each on its own connection to one
    shared store, is run and finished by exactly one of them."""
    RUNS.clear()
    FINISHED.clear()
    seed = make_store()
    with seed.transaction():
        tasks.put(seed, tasks.Task("op-1", "TEST_COUNTED", "target", {}, "gone|b|n|1|1|x",
                                   time.time() - 1))
    runners = [_runner(make_store(), f"runner-{i}") for i in range(4)]
    start = threading.Barrier(len(runners))

    def tick(runner: tasks.TaskRunner) -> None:
        start.wait()
        runner.tick()

    threads = [threading.Thread(target=tick, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for runner in runners:
        assert runner.wait_idle(30)
    assert RUNS == ["op-1"]
    assert len(FINISHED) == 1 and FINISHED[0][1].startswith("runner-")
    assert tasks.pending(seed) == []
