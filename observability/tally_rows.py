"""The rows a Tally (tally.py) keeps: one child's rows of every thread and how they are written
to prometheus_client (`Child`), a thread's rows by key (`Rows`), and `Pair`, the key of two
histograms observed together.
"""

from __future__ import annotations

from typing import Any

#: What one row holds: each child with its histogram's upper bounds (None: a counter's value).
Parts = tuple[tuple[Any, "tuple[float, ...] | None"], ...]


def layout(parts: Parts) -> tuple[tuple[float, ...] | None, ...]:
    """What must match for two rows of one key to add up: each part's bounds."""
    return tuple(b for _, b in parts)


class Rows(dict[Any, list[float]]):
    """One thread's rows by key: a dict a WeakSet can hold (gone with its thread), each one
    itself (equal to no other, whatever their contents)."""

    __slots__ = ("__weakref__",)

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other


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


class Child:
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
