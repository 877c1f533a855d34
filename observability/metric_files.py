"""prometheus_client's multiprocess metric files, made safe on a full or read-only disk.

prometheus_client (mmap_dict.MmapedDict) sizes each process's metric file with truncate() and
maps it: on a filesystem without room (a full tmpfs, a full disk) the file is sparse and the
first write into a page that has no block behind it kills the process with SIGBUS. Here every
page of the mapped size is allocated first (posix_fallocate), which fails with an error instead.
When it fails (or the file cannot be made at all: a read-only directory), the process's values
go on in memory (an anonymous map: serving goes on, its metrics are missing from scrapes) and
the file is tried again at most every RETRY_S; once it can be allocated the values are copied
back into it. `install()` puts this class where prometheus_client's multiprocess values make
their files (prometheus_client.values.MmapedDict).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import mmap
import os
import struct
import threading
import time
import weakref
from typing import Any

import prometheus_client.values
from prometheus_client.mmap_dict import MmapedDict

log = logging.getLogger("mlemu.metrics")

INITIAL_BYTES = 1 << 16
#: The file's first word: how many of its bytes are used (MmapedDict's layout).
_USED = struct.Struct("i")
#: A series' value and timestamp, where its position points (MmapedDict's layout).
_PAIR = struct.Struct("dd")
#: Least seconds between tries to put values held in memory back into their file.
RETRY_S = 5.0
#: Files whose values are in memory only (readiness lists them), and their dicts.
_DETACHED: set[str] = set()
_DETACHED_DICTS: weakref.WeakSet[SafeMmapedDict] = weakref.WeakSet()
_DETACHED_LOCK = threading.Lock()
#: Every metric file dict this process writes (release_pages walks them).
_WRITTEN: weakref.WeakSet[SafeMmapedDict] = weakref.WeakSet()


def detached() -> list[str]:
    """Metric files of this process whose values are in memory only."""
    with _DETACHED_LOCK:
        return sorted(_DETACHED)


def reattach_all() -> None:
    """Try to put every file's values held in memory back into it (each at most every
    RETRY_S): called periodically, since a file whose values rarely change (a gauge) may not
    be written again for a long time."""
    with _DETACHED_LOCK:
        waiting = list(_DETACHED_DICTS)
    for held in waiting:
        with held._lock:
            held._reattach()


def _allocate(fd: int, size: int) -> None:
    """Give the file `size` bytes with blocks behind them (OSError when there is no room)."""
    os.posix_fallocate(fd, 0, size)


def digest(key: str) -> bytes:
    """What the index keys a series by (see _Positions)."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()


class _Positions(dict[bytes, int]):
    """MmapedDict's series key -> position in the file, keyed by a 16-byte digest of the key
    instead of the key: a key spells out the metric's name, labels and help text (about 200
    bytes), and the map keeps one for every series the process ever wrote, also after its label
    child was removed (an unloaded version's: metric_values.py). 128 bits: no two series meet."""

    __slots__ = ()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(digest(key))

    def __getitem__(self, key: str) -> int:  # type: ignore[override]
        return super().__getitem__(digest(key))

    def __setitem__(self, key: str, position: int) -> None:  # type: ignore[override]
        super().__setitem__(digest(key), position)


def release_pages() -> None:
    """Unmap this process's pages of its metric files (MADV_DONTNEED on their shared mappings:
    the data stays in the file and the page cache, and a page is mapped again, without I/O, when
    a value on it is next read or written). A series stays in its file after its version is
    unloaded, and every page a process has touched stays in its memory until unmapped, so after
    a process served a thousand versions their series' pages would all count in its memory;
    released after an unload, it holds the pages of the series it still updates: the loaded
    versions'."""
    with _DETACHED_LOCK:
        written = list(_WRITTEN)
    for held in written:
        with held._lock:
            if held._f is not None and held._fname not in _DETACHED and not held._m.closed:
                held._m.madvise(mmap.MADV_DONTNEED)


class SafeMmapedDict(MmapedDict):  # type: ignore[misc]  # prometheus_client has no type hints
    """MmapedDict whose pages are allocated before they are mapped, falling back to memory."""

    def __init__(self, filename: str, read_mode: bool = False) -> None:
        # prometheus_client calls a dict under its own lock; reattach_all comes from elsewhere.
        self._lock = threading.RLock()
        self._fname = filename
        self._positions = _Positions()
        self._f: Any = None
        self._retry_at = 0.0
        try:
            self._f = open(filename, "rb" if read_mode else "a+b")  # noqa: SIM115 - kept open
            capacity = os.fstat(self._f.fileno()).st_size or INITIAL_BYTES
            if not read_mode:
                _allocate(self._f.fileno(), capacity)
            self._capacity = capacity
            self._m = mmap.mmap(self._f.fileno(), capacity, access=mmap.ACCESS_READ
                                if read_mode else mmap.ACCESS_WRITE)
        except OSError as exc:
            if read_mode:
                raise
            self._forget_empty_file()
            self._detach(INITIAL_BYTES, b"", exc)
        self._used = _USED.unpack_from(self._m, 0)[0]
        if self._used == 0:
            self._used = 8
            self._m[0:4] = _USED.pack(self._used)
        elif not read_mode:
            for key, _, _, pos in self._read_all_values():
                self._positions[key] = pos
        if not read_mode:
            with _DETACHED_LOCK:
                _WRITTEN.add(self)

    def _forget_empty_file(self) -> None:
        """Remove the file this process just made but could not size (nothing to read)."""
        if self._f is not None:
            with contextlib.suppress(OSError):
                if os.fstat(self._f.fileno()).st_size == 0:
                    os.unlink(self._fname)
            self._f.close()
            self._f = None

    def _detach(self, capacity: int, content: bytes, exc: OSError) -> None:
        """Keep the values in memory (a map of `capacity` bytes starting with `content`)."""
        if self._fname not in _DETACHED:
            log.warning("metrics of process %d kept in memory only (%s: %s): serving goes on, "
                        "scrapes miss them until the file can be written", os.getpid(),
                        os.path.basename(self._fname), exc.strerror or exc)
        with _DETACHED_LOCK:
            _DETACHED.add(self._fname)
            _DETACHED_DICTS.add(self)
        self._capacity = capacity
        self._m = mmap.mmap(-1, capacity)
        self._m[:len(content)] = content
        self._retry_at = time.monotonic() + RETRY_S

    def _reattach(self) -> None:
        """Put the values held in memory back into the file, when it can take them now."""
        if self._retry_at > time.monotonic() or self._fname not in _DETACHED:
            return
        self._retry_at = time.monotonic() + RETRY_S
        try:
            if self._f is None:
                self._f = open(self._fname, "a+b")  # noqa: SIM115 - kept open
            _allocate(self._f.fileno(), self._capacity)
            mapped = mmap.mmap(self._f.fileno(), self._capacity)
        except OSError:
            return
        mapped[:self._capacity] = self._m[:self._capacity]
        self._m = mapped
        with _DETACHED_LOCK:
            _DETACHED.discard(self._fname)
            _DETACHED_DICTS.discard(self)
        log.info("metrics of process %d are written to their file again", os.getpid())

    def _init_value(self, key: str) -> None:
        """prometheus_client's, with the file grown by allocation (or in memory)."""
        encoded = key.encode("utf-8")
        padded = encoded + (b" " * (8 - (len(encoded) + 4) % 8))
        needed = self._used + 4 + len(padded) + 16
        if needed > self._capacity:
            capacity = self._capacity
            while needed > capacity:
                capacity *= 2
            content = self._m[:self._used]
            try:
                if self._fname in _DETACHED:
                    raise OSError("kept in memory")
                _allocate(self._f.fileno(), capacity)
                self._m = mmap.mmap(self._f.fileno(), capacity)
                self._capacity = capacity
            except OSError as exc:
                self._detach(capacity, content, exc)
        super()._init_value(key)

    def write_value(self, key: str, value: float, timestamp: float) -> None:
        with self._lock:
            if self._fname in _DETACHED:
                self._reattach()
            super().write_value(key, value, timestamp)

    def read_value(self, key: str) -> tuple[float, float]:
        with self._lock:
            return super().read_value(key)  # type: ignore[no-any-return]

    def _position(self, key: str, key_digest: bytes) -> int:
        """Where `key`'s value is (made at 0 if new); `key_digest` is digest(key), computed once
        by the caller (metric_values.FileValue) rather than on every update."""
        found = self._positions.get(key_digest)
        if found is None:
            self._init_value(key)
            found = self._positions.get(key_digest, 0)
        return found

    def value(self, key: str, key_digest: bytes) -> float:
        with self._lock:
            at = self._position(key, key_digest)  # first: making the series may remap the file
            return float(_PAIR.unpack_from(self._m, at)[0])

    def put(self, key: str, key_digest: bytes, value: float, timestamp: float) -> None:
        with self._lock:
            if self._fname in _DETACHED:
                self._reattach()
            at = self._position(key, key_digest)
            # One slice assignment: a reader never sees the pair half written.
            self._m[at:at + _PAIR.size] = _PAIR.pack(value, timestamp)

    def close(self) -> None:
        if self._f is None:
            self._m.close()
            return
        super().close()


def install() -> None:
    """Make prometheus_client's multiprocess values use SafeMmapedDict (once per process)."""
    prometheus_client.values.MmapedDict = SafeMmapedDict  # type: ignore[misc]
