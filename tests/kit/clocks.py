"""Time readings that move only when a test says so, for code that decides from time.

A decision made from real clocks (how long a call took, how much CPU it used) changes with the
machine's speed and load; given these readings instead, the same calls make the same decisions
on any machine, so a test can assert them exactly.
"""

from __future__ import annotations

import threading


class FakeClock:
    """A monotonic clock that moves by `advance`, or by `step` on every reading when set."""

    def __init__(self, start: float = 0.0, step: float = 0.0) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeMeter:
    """Wall time, CPU time and voluntary waits of "the thread", moved by what a model does:
    `compute` spends CPU (wall and CPU time move), `wait` sleeps (wall time moves, one wait
    counts, no CPU). grpcserve.dispatch.Meter's readings, from `meter()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.wall = 0.0
        self.cpu = 0.0
        self.waits = 0

    def compute(self, seconds: float) -> None:
        with self._lock:
            self.wall += seconds
            self.cpu += seconds

    def wait(self, seconds: float) -> None:
        with self._lock:
            self.wall += seconds
            self.waits += 1

    def meter(self):  # -> grpcserve.dispatch.Meter (imported here only when used)
        from grpcserve.dispatch import Meter

        return Meter(wall=lambda: self.wall, cpu=lambda: self.cpu, waits=lambda: self.waits,
                     now=lambda: self.wall)


#: The meter the test models of tests/grpcserve/test_grpc_dispatch.py report to (they run in
#: the test's process, loaded as custom predictors, and find it by importing this module).
SHARED = FakeMeter()
