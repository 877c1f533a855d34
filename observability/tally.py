"""Lock-free recording for the hot path, flushed into prometheus_client's values.

Each prometheus_client update takes a lock and, in multiprocess mode, writes an mmap'd file (a
request's five values cost ~20 us of CPU, measured). Instead each thread adds to its own rows
(plain lists only it writes, so no lock and no lost update); `flush` (every second, from a
background thread, and by the process answering a scrape just before it reads) adds what changed
since the last flush. A scrape may thus miss the last second of another process's requests;
totals are exact.

Histograms are flushed into the child's own bucket and sum values: prometheus_client has no
public way to add many observations at once (its Histogram child keeps `_buckets`, one per upper
bound, and `_sum`; tests/observability/test_metrics_live.py checks the result).
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from bisect import bisect_left
from typing import Any


def bounds(buckets: tuple[float, ...]) -> tuple[float, ...]:
    """A histogram's upper bounds as prometheus_client keeps them (+Inf last)."""
    return (*buckets, float("inf"))


class Tally:
    """Per-thread rows of counter and histogram children, flushed together (see module doc)."""

    FLUSH_S = 1.0

    def __init__(self) -> None:
        self._local = threading.local()
        self._rows: list[tuple[Any, tuple[float, ...] | None, list[float], list[float]]] = []
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None

    def _row(self, child: Any, bounds: tuple[float, ...] | None) -> list[float]:
        try:
            rows = self._local.rows
        except AttributeError:
            rows = self._local.rows = {}
        row = rows.get(child)
        if row is None:
            row = rows[child] = [0.0] * (1 if bounds is None else len(bounds) + 1)
            with self._lock:
                self._rows.append((child, bounds, row, list(row)))
                if self._flusher is None:
                    ref = weakref.ref(self)
                    self._flusher = threading.Thread(target=_flush_loop, args=(ref,),
                                                     daemon=True, name="mlemu-metrics-flush")
                    self._flusher.start()
                    atexit.register(_flush, ref)  # a stopping worker's last second counts too
        return row

    def inc(self, child: Any, amount: float = 1.0) -> None:
        try:
            row = self._local.rows[child]
        except (AttributeError, KeyError):  # this thread's first use of `child`
            row = self._row(child, None)
        row[0] += amount

    def observe(self, child: Any, bounds: tuple[float, ...], value: float) -> None:
        try:
            row = self._local.rows[child]
        except (AttributeError, KeyError):
            row = self._row(child, bounds)
        row[0] += value
        row[1 + bisect_left(bounds, value)] += 1

    def flush(self) -> None:
        with self._lock:
            for child, bounds, row, last in self._rows:
                now = list(row)  # one atomic copy; the owner thread may add more meanwhile
                if now == last:
                    continue
                if bounds is None:
                    child.inc(now[0] - last[0])
                else:
                    if now[0] != last[0]:
                        child._sum.inc(now[0] - last[0])
                    for i in range(1, len(now)):
                        if now[i] != last[i]:
                            child._buckets[i - 1].inc(now[i] - last[i])
                last[:] = now


def _flush(ref: weakref.ref[Tally]) -> bool:
    tally = ref()
    if tally is None:
        return False
    tally.flush()
    return True


def _flush_loop(ref: weakref.ref[Tally]) -> None:
    """Every FLUSH_S seconds while the tally lives (an emulator dropped in a test ends it)."""
    while True:
        time.sleep(Tally.FLUSH_S)
        if not _flush(ref):
            return
