"""A change signal that every process of one SQLite store shares: eight bytes of a small file
beside the database, mapped into memory, rewritten after each committed write.

Why: a prediction asks the store whether anything changed since the serving version it cached
(registry/lookup.py). With SQLite that question was `PRAGMA data_version`: a query per request,
which takes the database's read lock (two fcntl calls) and releases the GIL while SQLite runs, a
point where the request's thread can lose the GIL to another request: a measurable share of one-
row `:predict` throughput (bench/NOTES.md). Reading a word of shared memory is neither a system
call nor a GIL release.

Each committed write stores a fresh random 64-bit value, after its commit. A reader takes the
value before it reads the store, and keeps what it read for as long as the value stays the same:
any commit stores a value that reader has not seen, after the commit, so the reader's next look
sees the change and reads again. Values are random rather than counted because processes write
without a lock between them: two writers that both stored "n + 1" would look like one write.

The file only signals; the database stays the truth. Writers that bypass SqliteStore (another
program editing the file) are not signalled: mlemu sees their changes after its next write or
restart. Where the file cannot be made (a read-only state directory), SqliteStore falls back to
the query.
"""

from __future__ import annotations

import mmap
import os
import secrets
from pathlib import Path

_SIZE = 8


class ChangeSignal:
    """The shared change value of the store whose signal file is `path`."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            # Zeros with a block behind them: a sparse page (ftruncate) on a full filesystem
            # would kill the process with SIGBUS at its first write; this fails instead, and the
            # store falls back to the query. Allocating again from another process is harmless.
            os.posix_fallocate(fd, 0, _SIZE)
            self._map = mmap.mmap(fd, _SIZE)  # MAP_SHARED: every process maps the same page
        finally:
            os.close(fd)
        self._value = memoryview(self._map).cast("Q")

    def value(self) -> int:
        return self._value[0]

    def signal(self) -> None:
        """Tell every process that the store changed (call after the commit)."""
        self._value[0] = secrets.randbits(64)

    @classmethod
    def open(cls, path: Path) -> ChangeSignal | None:
        """The signal, or None where its file cannot be made or mapped."""
        try:
            return cls(path)
        except (OSError, ValueError):
            return None
