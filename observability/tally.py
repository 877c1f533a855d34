"""Lock-free recording for the hot path, flushed into prometheus_client's values.

Each prometheus_client update takes a lock and, in multiprocess mode, writes an mmap'd file (a
request's five values cost a measurable share of its CPU). Instead each thread adds to its own rows
(plain lists only it writes, so no lock and no lost update); `flush` (every second or so, from a
background thread, and by the process answering a scrape just before it reads) adds what changed
since the last flush. A scrape may thus miss the last second (with very many label sets, the last
few seconds, see below) of another process's requests; totals are exact.

Histograms are flushed into the child's own bucket and sum values: prometheus_client has no
public way to add many observations at once (its Histogram child keeps `_buckets`, one per upper
bound, and `_sum`; tests/observability/test_metrics_live.py checks the result).

Values always recorded together share a row, so the hot path looks one row up per event, not
one per value: a request's counter (by status code) and its latency histogram
(`counted`: the counter's value is the row's number of updates), a model call's latency and
instances histograms (`observe_pair`). Each row lookup goes through a thread-local and a
dict, and between two requests the model's own work evicts them from the CPU's caches, so
fewer lookups per request cost measurably less (bench/notes/metrics-cost.md).

A flush costs time in proportion to the rows: one per thread and label set. With many models
(200 versions spread over 4 busy threads, 4 rows each per version) it took a visible share of a
worker's GIL time every second (py-spy; bench/NOTES.md), and a request that needed the
GIL meanwhile waited. So the background flush is paced to take at most FLUSH_SHARE of the time
(never less often than every MAX_FLUSH_S), skips a child whose rows did not change at one sum
(each row counts its own updates), and lets other threads run every SLICE_S. It adds up the
threads' rows of a child before writing: each prometheus_client write takes a lock (and in
multiprocess mode packs into a mapped file), so a child's sum and each changed bucket are written
once per flush, not once per thread that changed them, which costs less CPU than writing row by
row (bench/NOTES.md, seventh session, "the metrics flush"); with more busy threads the gap
grows.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

#: The key a `counted` recorder's events are recorded by (a request's label tuple).
K = TypeVar("K", bound=Hashable)
#: What one row holds: each child with its histogram's upper bounds (None: a counter's value).
Parts = tuple[tuple[Any, "tuple[float, ...] | None"], ...]


def bounds(buckets: tuple[float, ...]) -> tuple[float, ...]:
    """A histogram's upper bounds as prometheus_client keeps them (+Inf last)."""
    return (*buckets, float("inf"))


class Tally:
    """Per-thread rows of counter and histogram children, flushed together (see module doc)."""

    #: Seconds between background flushes, at least (and while flushes are cheap).
    FLUSH_S = 1.0
    #: Most share of the time the background flush may take: a slower flush runs less often...
    FLUSH_SHARE = 0.01
    #: ...but at least this often, so another process's scrape is never further behind.
    MAX_FLUSH_S = 10.0
    #: Longest a flush holds the GIL before it gives other threads a chance to take it.
    SLICE_S = 0.0005

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 pause: Callable[[float], None] = time.sleep) -> None:
        #: What a flush measures its slices with, and how it lets other threads run (tests
        #: pass their own, so the slicing is the same on any machine).
        self._clock = clock
        self._pause = pause
        self._local = threading.local()
        #: Every child recorded to, with every thread's row of it; added to under the lock only.
        self._children: dict[Any, _Child] = {}
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None

    def _row(self, key: Any, parts: Parts, counts: Any = None) -> list[float]:
        """This thread's row of `key`, made on its first use: `parts` (the children it holds,
        each a counter's value or a histogram's sum and buckets), then its number of updates."""
        try:
            rows = self._local.rows
        except AttributeError:
            rows = self._local.rows = {}
        row = rows.get(key)
        if row is None:
            size = sum(1 if b is None else len(b) + 1 for _, b in parts) + 1
            row = rows[key] = [0.0] * size
            with self._lock:
                entry = self._children.get(key)
                if entry is None:
                    entry = self._children[key] = _Child(parts, counts, size)
                elif entry.parts != parts or entry.counts is not counts:
                    # Each thread's rows of one key must add up: one layout per key.
                    raise ValueError("a tally key is recorded to one way only")
                entry.rows.append(row)
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
            row = self._row(child, ((child, None),))
        row[0] += amount
        row[-1] += 1

    def observe(self, child: Any, bounds: tuple[float, ...], value: float) -> None:
        try:
            row = self._local.rows[child]
        except (AttributeError, KeyError):
            row = self._row(child, ((child, bounds),))
        row[0] += value
        row[1 + bisect_left(bounds, value)] += 1
        row[-1] += 1

    def observe_each(self, child: Any, bounds: tuple[float, ...], values: Iterable[float]) -> None:
        """Each of `values` observed in `child`: one row lookup for them all (a merged model
        call's requests, each with its own instances)."""
        try:
            row = self._local.rows[child]
        except (AttributeError, KeyError):
            row = self._row(child, ((child, bounds),))
        for value in values:
            row[0] += value
            row[1 + bisect_left(bounds, value)] += 1
            row[-1] += 1

    def recorder(self, child: Any, bounds: tuple[float, ...]) -> Callable[[float], None]:
        """`observe(child, bounds, value)` as a function of `value` alone, for a child recorded
        once per request (batching's queue wait): one call per event, not two."""
        local, make = self._local, self._row

        def record(value: float) -> None:
            try:
                row = local.rows[child]
            except (AttributeError, KeyError):
                row = make(child, ((child, bounds),))
            row[0] += value
            row[1 + bisect_left(bounds, value)] += 1
            row[-1] += 1

        return record

    def counted(self, resolve: Callable[[K], tuple[Any, Any]],
                bounds: tuple[float, ...]) -> Callable[[K, float], None]:
        """A recorder of events each observed in a histogram and counted by a counter (a
        request: its latency, and its count with its status code), called as `record(key,
        value)`: `key` names the event's labels and `resolve(key)` gives its (counter,
        histogram) children, asked only the first time a thread records that key. One row per
        key holds both (the counter's value is the row's number of updates), found with the
        caller's key itself: one call and one lookup per event, not a lookup of the children
        and then of their row."""
        local, make = self._local, self._row

        def record(key: K, value: float) -> None:
            try:
                row = local.rows[key]
            except (AttributeError, KeyError):  # this thread's first use of `key`
                counter, histogram = resolve(key)
                row = make(key, ((histogram, bounds),), counts=counter)
            row[0] += value
            row[1 + bisect_left(bounds, value)] += 1
            row[-1] += 1

        return record

    def observe_pair(self, pair: Pair, first: float, second: float) -> None:
        """`first` observed in `pair.first` and `second` in `pair.second` (a model call: its
        latency and its instances), in one row: one lookup instead of two."""
        try:
            row = self._local.rows[pair]
        except (AttributeError, KeyError):
            row = self._row(pair, pair.parts)
        row[0] += first
        row[1 + bisect_left(pair.first_bounds, first)] += 1
        at = pair.at
        row[at] += second
        row[at + 1 + bisect_left(pair.second_bounds, second)] += 1
        row[-1] += 1

    def flush(self) -> None:
        with self._lock:
            clock = self._clock
            slice_end = clock() + self.SLICE_S
            for entry in self._children.values():
                entry.flush()
                if clock() > slice_end:
                    self._pause(0)  # releases the GIL: a waiting request runs now, not in 5 ms
                    slice_end = clock() + self.SLICE_S


class Pair:
    """Two histogram children always observed together (`Tally.observe_pair`); the key of their
    rows, so one Pair is made per couple and kept (VersionInstruments holds its own)."""

    __slots__ = ("at", "first", "first_bounds", "parts", "second", "second_bounds")

    def __init__(self, first: Any, first_bounds: tuple[float, ...], second: Any,
                 second_bounds: tuple[float, ...]) -> None:
        self.first, self.first_bounds = first, first_bounds
        self.second, self.second_bounds = second, second_bounds
        self.parts: Parts = ((first, first_bounds), (second, second_bounds))
        #: Where the second histogram's sum is in a row (its buckets follow).
        self.at = len(first_bounds) + 1


class _Child:
    """Every thread's row of one key (its `parts`, see `Tally._row`), and their sum as last
    written to prometheus_client; `counts`, a counter that counts the row's updates."""

    __slots__ = ("counts", "parts", "rows", "written")

    def __init__(self, parts: Parts, counts: Any, size: int) -> None:
        self.parts = parts
        self.counts = counts
        self.rows: list[list[float]] = []
        self.written = [0.0] * size

    def flush(self) -> None:
        rows, written = self.rows, self.written
        if sum([row[-1] for row in rows]) == written[-1]:  # no update since the last flush
            return
        # Each copy is atomic (its owner thread may add more meanwhile); rows only grow, so the
        # sum of the copies is what to have written so far, and a later update the next flush's.
        copies = [row[:] for row in rows]
        now = copies[0] if len(copies) == 1 else [sum(c) for c in zip(*copies, strict=True)]
        at = 0
        for child, bounds in self.parts:
            if bounds is None:
                child.inc(now[at] - written[at])
                at += 1
                continue
            if now[at] != written[at]:
                child._sum.inc(now[at] - written[at])
            for i, bucket in enumerate(child._buckets, at + 1):
                if now[i] != written[i]:
                    bucket.inc(now[i] - written[i])
            at += len(bounds) + 1
        if self.counts is not None:
            self.counts.inc(now[-1] - written[-1])
        self.written = now


def _flush(ref: weakref.ref[Tally]) -> bool:
    tally = ref()
    if tally is None:
        return False
    tally.flush()
    return True


def _flush_loop(ref: weakref.ref[Tally]) -> None:
    """Flush while the tally lives (an emulator dropped in a test ends it), paced: every
    FLUSH_S, or FLUSH_SHARE of the time a flush takes when that is longer, up to MAX_FLUSH_S."""
    wait = Tally.FLUSH_S
    while True:
        time.sleep(wait)
        started = time.perf_counter()
        if not _flush(ref):
            return
        wait = pace(time.perf_counter() - started)


def pace(took: float) -> float:
    """Seconds to the next background flush after one that took `took` seconds."""
    return min(Tally.MAX_FLUSH_S, max(Tally.FLUSH_S, took / Tally.FLUSH_SHARE))
