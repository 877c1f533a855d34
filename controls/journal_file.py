"""One process's journal file, appended to through a memory mapping.

Why a mapping: an `os.write` per request releases the GIL, and with several requests in flight
each release is a hand-off between a worker's threads (a voluntary context switch and a wait for
the GIL back; bench/notes/gunicorn-worker.md, "The journal's write"). Copying into a shared
mapping makes no system call, and other processes reading the file with `read()` see the bytes at
once (a MAP_SHARED mapping and `read()` go through the same page cache).

Layout: the file is allocated to its full size when opened (`posix_fallocate`, so a full disk
fails there, not as a SIGBUS on a later write through the mapping) and reads as zeros past what
was written; the content ends at the first NUL byte (a JSON line never holds one: orjson writes
U+0000 as an escape). Only a window of `WINDOW` bytes is mapped at a time, so the pages a
process has mapped, and that count in its memory, stay few whatever the file's size.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

#: Bytes mapped at a time (a multiple of the mapping granularity, so windows can start there).
WINDOW = 64 << 10
#: Bytes read at a time when looking for a file's end.
_CHUNK = 64 << 10


def content(path: Path) -> bytes:
    """What was written to a journal file (its bytes up to the first NUL); b"" if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return _read_to_nul(fd)
    finally:
        os.close(fd)


def _read_to_nul(fd: int) -> bytes:
    parts: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, _CHUNK, offset)
        cut = chunk.find(b"\0")
        if cut >= 0:
            parts.append(chunk[:cut])
            break
        parts.append(chunk)
        if len(chunk) < _CHUNK:
            break
        offset += len(chunk)
    return b"".join(parts)


class AppendFile:
    """A journal file of `capacity` bytes open for appending (see the module docstring). The
    caller keeps `end + len(data) <= capacity` (the journal rotates the file before that)."""

    def __init__(self, path: Path, capacity: int) -> None:
        self.capacity = capacity
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            #: Where the next byte goes: after what an earlier process of this pid left.
            self.end = len(_read_to_nul(self._fd))
            if os.fstat(self._fd).st_size < capacity:
                os.posix_fallocate(self._fd, 0, capacity)
        except BaseException:
            os.close(self._fd)
            raise
        self._map: mmap.mmap | None = None
        self._base = -1

    def _window(self, base: int) -> mmap.mmap:
        if self._map is not None:
            self._map.close()
            self._map = None
        self._map = mmap.mmap(self._fd, min(WINDOW, self.capacity - base), offset=base)
        self._base = base
        return self._map

    def write(self, data: bytes) -> None:
        """Append `data` (in place: the windows it crosses are mapped in turn)."""
        view = memoryview(data)
        pos = self.end
        while view:
            base = pos - pos % WINDOW
            window = self._map if self._base == base and self._map is not None \
                else self._window(base)
            offset = pos - base
            n = min(len(view), len(window) - offset)
            window[offset:offset + n] = view[:n]
            view, pos = view[n:], pos + n
        self.end = pos

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        os.close(self._fd)
