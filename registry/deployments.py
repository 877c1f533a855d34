"""The per-process cache of loaded predictors, keyed by version name, with what belongs to them:
the options they are loaded with and each one's request batcher.

A version is loaded on first use (or by warm-up) and reused until the store shows a different
incarnation of that name (its `uid` changed: deleted and re-created) or it is dropped. Loading
(which downloads gs:// artifacts first, see registry/gcs.py) happens once per version even when
many threads ask at once. A failed load is remembered for the same incarnation so a broken model
does not reload on every request. Callers look the version up in the store on every request, so
a version deleted through another process or instance stops serving here at once.

Memory is bounded per process by two caps: on loaded versions (MLEMU_MAX_LOADED_VERSIONS) and
on their estimated memory plus what versions loaded before still hold (MLEMU_MAX_LOADED_MB;
registry/footprint.py says how a version is sized, what it leaves and which versions go).
Loading one more than a cap allows unloads the least recently used ones, which load again on
their next request. An unloaded predictor is not closed: it is only forgotten here, so a
request (or a batch) already using it finishes normally and its memory is freed when the last
of them lets go.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import predictors
from core.errors import ApiError, ModelLoadError
from observability import instrument
from observability.metrics import Instruments, multiprocess, short_names
from predictors.base import Predictor, PredictorOptions
from predictors.batching import Batchers
from predictors.container import ContainerHost
from registry import artifacts, footprint
from registry.gcs import GcsCache
from registry.resources import Version

Loader = Callable[[Version], Predictor]
#: A loaded version's estimated memory in bytes (registry/footprint.py).
Sizer = Callable[[Version, Predictor], int]

log = logging.getLogger("mlemu")


class _Entry:
    """One version's load result, when it was last asked for (for least-recently-used) and its
    estimated memory (0 for a failed load, which holds no model)."""

    __slots__ = ("size", "uid", "used", "value")

    def __init__(self, uid: str, value: Predictor | ApiError, used: int, size: int = 0) -> None:
        self.uid = uid
        self.value = value
        self.used = used
        self.size = size


class Deployments:
    def __init__(self, package_cache: Path, loader: Loader | None = None,
                 gcs: GcsCache | None = None, options: PredictorOptions | None = None,
                 max_loaded: int = 0, instruments: Instruments | None = None,
                 containers: ContainerHost | None = None, max_bytes: int = 0,
                 sizer: Sizer | None = None, residue: int | None = None) -> None:
        self._package_cache = package_cache
        #: Runs Vertex AI custom containers' commands (None: they do not load).
        self.containers = containers
        #: Metrics of loads and model calls (None: metrics off; calls are still attributed).
        self.instruments = instruments
        #: How this emulator's built-in predictors run (e.g. XGBoost's threads per call).
        self.options = options or PredictorOptions()
        #: The request batcher of each loaded predictor (predictors/batching.py).
        self.batchers = Batchers()
        #: Where gs:// artifacts are copied before loading (None: gs:// URIs fail to load).
        self.gcs = gcs
        self._loader = loader or self.load_version
        #: Most predictors kept loaded at once (0: no bound); see the module docstring.
        self.max_loaded = max_loaded
        #: Most estimated bytes of loaded predictors at once (0: no bound); see the module docstring.
        self.max_bytes = max_bytes
        self._sizer = sizer or self._measured_size
        #: Bytes each version loaded before but not now still holds (footprint.RESIDUE).
        self.residue = (footprint.residue(instruments is not None, multiprocess())
                        if residue is None else residue)
        #: Version name -> estimate recorded by load_version (taken by _measured_size under the
        #: version's load lock).
        self._sizes: dict[str, int] = {}
        #: Predictors unloaded since the last `trim` (counted under the guard).
        self._unloaded_since_trim = 0
        #: Predictors the caps unloaded since this process started (warm-up stops at the first).
        self.evicted = 0
        self._entries: dict[str, _Entry] = {}
        #: Version name -> uid of versions the cap unloaded after they loaded fine (they serve:
        #: the next request reloads them).
        self._unloaded: dict[str, str] = {}
        # A use counter rather than an ordered dict: marking a use is one attribute write, with
        # no lock on the request path; the rare eviction scans the entries instead.
        self._clock = itertools.count()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def load_version(self, version: Version) -> Predictor:
        """Resolve a version's artifacts and build its predictor (no caching)."""
        container = version.serving.get("container")
        if container is not None:  # a Vertex AI custom container: its command, started here
            if self.containers is None:
                raise ModelLoadError("Custom containers do not run in this process.")
            model_dir = (artifacts.resolve_model_dir(version.deployment_uri, self.gcs)
                         if version.deployment_uri else "")
            return self.containers.start(container, model_dir)
        model_dir = artifacts.resolve_model_dir(version.deployment_uri, self.gcs)
        roots = [
            artifacts.unpack_package(artifacts.resolve_uri(uri, gcs=self.gcs), self._package_cache)
            for uri in version.package_uris
        ]
        predictor, framework = predictors.load(
            model_dir, version.framework or None, version.prediction_class or None, roots,
            self.options)
        self._sizes[version.name] = footprint.estimate(model_dir, framework)
        return predictor

    def _measured_size(self, version: Version, predictor: Predictor) -> int:
        """The estimate load_version recorded; the bare overhead for another loader's predictor."""
        return self._sizes.pop(version.name, footprint.OVERHEAD)

    def get(self, version: Version) -> Predictor:
        entry = self._entries.get(version.name)
        if entry is None or entry.uid != version.uid:
            entry = self._load(version)
        else:
            entry.used = next(self._clock)
        value = entry.value
        if isinstance(value, ApiError):
            raise value
        return value

    def _load(self, version: Version) -> _Entry:
        with self._guard:
            lock = self._locks.setdefault(version.name, threading.Lock())
        with lock:
            entry = self._entries.get(version.name)
            if entry is not None and entry.uid == version.uid:
                return entry  # another thread loaded it meanwhile
            value: Predictor | ApiError
            started = time.perf_counter()
            try:
                with instrument.attributed(version.name):  # what from_path prints is the model's
                    value = self._loader(version)
            except ApiError as exc:
                value = exc
            except Exception as exc:  # noqa: BLE001 - a loader bug must not leak a traceback
                value = ModelLoadError(f"Could not load the model: {type(exc).__name__}: {exc}")
            self._observe_load(version.name, value, time.perf_counter() - started)
            if entry is not None and not isinstance(entry.value, ApiError):
                self._unloaded_metric(version.name, entry.size)
                entry.value.close()
            size = 0 if isinstance(value, ApiError) else self._size_of(version, value)
            entry = _Entry(version.uid, value, next(self._clock), size)
            self._loaded_bytes_metric(size)
            self._entries[version.name] = entry
            self._unloaded.pop(version.name, None)
        if not isinstance(value, ApiError):
            self._enforce_cap(version.name)
        return entry

    def _enforce_cap(self, keep: str) -> None:
        """Unload the least recently used predictors beyond the caps (never `keep`, the one just
        loaded; footprint.evictions decides). Failed loads hold no model and do not count."""
        if self.max_loaded <= 0 and self.max_bytes <= 0:
            return
        with self._guard:
            kept = self._entries.get(keep)
            entries = {name: e for name, e in list(self._entries.items())
                       if not isinstance(e.value, ApiError) and name != keep}
            names = footprint.evictions([(e.used, name, e.size) for name, e in entries.items()],
                                        kept.size if kept is not None else 0,
                                        self.max_loaded, self.max_bytes,
                                        self._residue_count(len(entries) + 1), self.residue)
            for name in names:
                entry = entries[name]
                if self._entries.get(name) is entry:
                    del self._entries[name]
                    self._unloaded[name] = entry.uid
                    self._unloaded_since_trim += 1
                    self.evicted += 1
                    self._unloaded_metric(name, entry.size)
                    if self.instruments is not None:
                        self.instruments.version(name).evictions.inc()
        # Not closed: a request or batch may still be running on it (module docstring).
        for name in names:
            log.info("unloaded %s: least recently used of more than %s; it reloads on its next "
                     "request", name, footprint.caps_text(self.max_loaded, self.max_bytes))

    def trim(self, release: Callable[[], object] = footprint.release_freed_memory) -> bool:
        """After predictors were unloaded (by the caps, or dropped), forget what the metrics kept
        for them (Instruments.forget) and give the memory they freed back to the system (called
        from the emulator's periodic tick, not per eviction: a trim walks the heap). Whether it
        released."""
        with self._guard:
            due, self._unloaded_since_trim = self._unloaded_since_trim > 0, 0
        # Also while rows retired last time wait for their last flush (tally.retire's 2nd step).
        if self.instruments is not None and (due or self.instruments.tally.retiring()):
            self.instruments.forget(self.in_use())
        if due:
            release()
        return due

    def in_use(self) -> set[tuple[str, str]]:
        """(model, version) metric labels of the versions loaded or loading now: what the
        metrics keep rows and children for (the others' are forgotten after an unload)."""
        names = [name for name, lock in list(self._locks.items()) if lock.locked()]
        return {short_names(name) for name in [*list(self._entries), *names]}

    def _size_of(self, version: Version, predictor: Predictor) -> int:
        try:
            return max(0, int(self._sizer(version, predictor)))
        except Exception:  # noqa: BLE001 - an unreadable directory is sized as the bare overhead
            return footprint.OVERHEAD

    def loaded_bytes(self) -> int:
        """The estimated memory of the predictors loaded now."""
        return sum(e.size for e in list(self._entries.values()))

    def _residue_count(self, loaded: int) -> int:
        """Versions holding a residue: all this process set out to load (a lock each) but these."""
        return max(0, len(self._locks) - loaded)

    def has_room(self) -> bool:
        """Whether one more version loads without unloading another (what warm-up asks)."""
        sizes = [e.size for e in list(self._entries.values()) if not isinstance(e.value, ApiError)]
        held = self._residue_count(len(sizes)) * self.residue
        return footprint.has_room(len(sizes), sum(sizes) + held, self.max_loaded, self.max_bytes)

    def drop(self, name: str, uid: str | None = None) -> None:
        """Unload `name` (only the incarnation `uid`, when given)."""
        with self._guard:
            if uid is None or self._unloaded.get(name) == uid:
                self._unloaded.pop(name, None)
            entry = self._entries.get(name)
            if entry is None or (uid is not None and entry.uid != uid):
                return
            del self._entries[name]
            self._unloaded_since_trim += 1
            if not isinstance(entry.value, ApiError):
                self._unloaded_metric(name, entry.size)
        if not isinstance(entry.value, ApiError):
            entry.value.close()

    def _observe_load(self, name: str, value: Predictor | ApiError, seconds: float) -> None:
        """Count the load and instrument the predictor's model calls (observability/instrument.py)."""
        metrics = self.instruments.version(name) if self.instruments is not None else None
        if isinstance(value, ApiError):
            if metrics is not None:
                metrics.load_failures.inc()
            return
        if metrics is not None:
            metrics.load_seconds.observe(seconds)
            metrics.loaded.inc()
        if metrics is not None or not value.framework:  # custom code's output is attributed
            instrument.instrument(value, name, metrics)

    def _unloaded_metric(self, name: str, size: int) -> None:
        if self.instruments is not None:
            self.instruments.version(name).loaded.dec()
            self.instruments.metrics.models_loaded_bytes.dec(size)

    def _loaded_bytes_metric(self, size: int) -> None:
        if self.instruments is not None and size:
            self.instruments.metrics.models_loaded_bytes.inc(size)

    def prune(self, current_uid: Callable[[str], str | None]) -> list[str]:
        """Unload versions whose store incarnation is gone or changed (deleted or re-created
        through another process or instance; they stopped serving at once, this frees them)."""
        dropped = []
        known = [(name, e.uid) for name, e in list(self._entries.items())]
        for name, uid in known + list(self._unloaded.items()):
            if current_uid(name) != uid:
                self.drop(name, uid)
                dropped.append(name)
        return dropped

    def incarnations(self) -> frozenset[tuple[str, str]]:
        """(name, uid) of every version held or unloaded by the cap: what `prune` checks."""
        return frozenset([(name, e.uid) for name, e in list(self._entries.items())]
                         + list(self._unloaded.items()))

    def loaded(self) -> dict[str, Predictor]:
        return {n: e.value for n, e in list(self._entries.items())
                if not isinstance(e.value, ApiError)}

    def is_loaded(self, version: Version) -> bool:
        entry = self._entries.get(version.name)
        return entry is not None and entry.uid == version.uid and not isinstance(entry.value, ApiError)

    def serves(self, version: Version) -> bool:
        """Loaded, or loaded fine before and unloaded by the cap (it reloads on demand): what
        readiness asks of a bootstrap version."""
        return self.is_loaded(version) or self._unloaded.get(version.name) == version.uid
