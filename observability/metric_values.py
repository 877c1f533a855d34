"""prometheus_client's multiprocess metric values, made so that a removed label child is freed.

prometheus_client 0.26's multiprocess value (prometheus_client/values.py, `MultiProcessValue`)
appends every value it makes to a list the module keeps for good (to reset them after a fork),
and caches the value in the object, writing `cached + amount` back on each increment. So a label
child removed from its metric (`remove_by_labels`: what observability/metrics.py does for the
children of versions no longer loaded) is never freed, and a removed child still held somewhere
(a request finishing on an unloaded model) would write its stale cached value over what the child
made after it wrote meanwhile: a counter going back.

`FileValue` keeps no list and caches nothing: every update reads the value from the process's
file and writes the sum back under one lock, so any number of objects for one series agree, and
a child made again reads its value back from the file (counters never go back). Its file layout
is prometheus_client's (MmapedDict through metric_files.SafeMmapedDict, keys from `mmap_key`),
so the multiprocess collector reads it unchanged. `install()` makes prometheus_client's metrics
use it; only in multiprocess mode (in one process the values live in the children).
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any

import prometheus_client.values
from prometheus_client.mmap_dict import mmap_key

from observability.metric_files import SafeMmapedDict, digest

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: One lock for every file of the process, as prometheus_client's multiprocess values take.
_LOCK = threading.Lock()
#: This process's open files by prefix ("counter", "gauge_livesum", ...), and whose they are.
_files: dict[str, SafeMmapedDict] = {}
_owner = [os.getpid()]


def _file(prefix: str) -> SafeMmapedDict:
    """The process's file for `prefix` (under _LOCK). After a fork the parent's files are the
    parent's: the child closes its copies and makes its own, named by its pid."""
    pid = os.getpid()
    if pid != _owner[0]:
        for inherited in _files.values():
            inherited.close()
        _files.clear()
        _owner[0] = pid
    found = _files.get(prefix)
    if found is None:
        path = os.path.join(os.environ[MULTIPROC_ENV], f"{prefix}_{pid}.db")
        found = _files[prefix] = SafeMmapedDict(path)
    return found


class FileValue:
    """One series' value in this process's metric file (see the module docstring)."""

    __slots__ = ("_digest", "_key", "_prefix")
    _multiprocess = True

    def __init__(self, typ: str, metric_name: str, name: str, labelnames: Any, labelvalues: Any,
                 help_text: str, multiprocess_mode: str = "", **kwargs: Any) -> None:
        self._prefix = f"gauge_{multiprocess_mode}" if typ == "gauge" else typ
        self._key = mmap_key(metric_name, name, labelnames, labelvalues, help_text)
        self._digest = digest(self._key)
        with _LOCK:  # the series is in the file (at 0) from its creation, as prometheus_client's
            _file(self._prefix).value(self._key, self._digest)

    def inc(self, amount: float) -> None:
        with _LOCK:
            file = _file(self._prefix)
            file.put(self._key, self._digest, file.value(self._key, self._digest) + amount, 0.0)

    def set(self, value: float, timestamp: float | None = None) -> None:
        with _LOCK:
            _file(self._prefix).put(self._key, self._digest, value, timestamp or 0.0)

    def get(self) -> float:
        with _LOCK:
            return _file(self._prefix).value(self._key, self._digest)

    def set_exemplar(self, exemplar: Any) -> None:
        return  # prometheus_client's multiprocess values keep no exemplars either

    def get_exemplar(self) -> None:
        return None


def install() -> None:
    """In multiprocess mode, make prometheus_client's metrics build their values as FileValue
    (before any metric child is made: observability/metrics.py calls this on import)."""
    if not os.environ.get(MULTIPROC_ENV):
        return
    prometheus_client.values.ValueClass = FileValue
    # prometheus_client warns on every remove in multiprocess mode because the removed series
    # stays in the files; here that is the point (its value is read back when it is made again).
    warnings.filterwarnings("ignore", message="Removal of labels has not been implemented",
                            category=UserWarning)
