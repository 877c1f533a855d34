"""The per-process cache of loaded predictors, keyed by version name, with what belongs to them:
the options they are loaded with and each one's request batcher.

A version is loaded on first use (or by warm-up) and reused until the store shows a different
incarnation of that name (its `uid` changed: deleted and re-created) or it is dropped. Loading
(which downloads gs:// artifacts first, see registry/gcs.py) happens once per version even when
many threads ask at once. A failed load is remembered for the same incarnation so a broken model
does not reload on every request. Callers look the version up in the store on every request, so
a version deleted through another process or instance stops serving here at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import predictors
from errors import ApiError, ModelLoadError
from predictors.base import Predictor, PredictorOptions
from predictors.batching import Batchers
from registry import artifacts
from registry.gcs import GcsCache
from registry.resources import Version

Loader = Callable[[Version], Predictor]


class Deployments:
    def __init__(self, package_cache: Path, loader: Loader | None = None,
                 gcs: GcsCache | None = None, options: PredictorOptions | None = None) -> None:
        self._package_cache = package_cache
        #: How this emulator's built-in predictors run (e.g. XGBoost's threads per call).
        self.options = options or PredictorOptions()
        #: The request batcher of each loaded predictor (predictors/batching.py).
        self.batchers = Batchers()
        #: Where gs:// artifacts are copied before loading (None: gs:// URIs fail to load).
        self.gcs = gcs
        self._loader = loader or self.load_version
        self._entries: dict[str, tuple[str, Predictor | ApiError]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def load_version(self, version: Version) -> Predictor:
        """Resolve a version's artifacts and build its predictor (no caching)."""
        model_dir = artifacts.resolve_model_dir(version.deployment_uri, self.gcs)
        roots = [
            artifacts.unpack_package(artifacts.resolve_uri(uri, gcs=self.gcs), self._package_cache)
            for uri in version.package_uris
        ]
        predictor, _ = predictors.load(
            model_dir, version.framework or None, version.prediction_class or None, roots,
            self.options)
        return predictor

    def get(self, version: Version) -> Predictor:
        entry = self._entries.get(version.name)
        if entry is None or entry[0] != version.uid:
            entry = self._load(version)
        value = entry[1]
        if isinstance(value, ApiError):
            raise value
        return value

    def _load(self, version: Version) -> tuple[str, Predictor | ApiError]:
        with self._guard:
            lock = self._locks.setdefault(version.name, threading.Lock())
        with lock:
            entry = self._entries.get(version.name)
            if entry is not None and entry[0] == version.uid:
                return entry  # another thread loaded it meanwhile
            value: Predictor | ApiError
            try:
                value = self._loader(version)
            except ApiError as exc:
                value = exc
            except Exception as exc:  # noqa: BLE001 - a loader bug must not leak a traceback
                value = ModelLoadError(f"Could not load the model: {type(exc).__name__}: {exc}")
            if entry is not None and not isinstance(entry[1], ApiError):
                entry[1].close()
            entry = (version.uid, value)
            self._entries[version.name] = entry
            return entry

    def drop(self, name: str, uid: str | None = None) -> None:
        """Unload `name` (only the incarnation `uid`, when given)."""
        with self._guard:
            entry = self._entries.get(name)
            if entry is None or (uid is not None and entry[0] != uid):
                return
            del self._entries[name]
        if not isinstance(entry[1], ApiError):
            entry[1].close()

    def prune(self, current_uid: Callable[[str], str | None]) -> list[str]:
        """Unload versions whose store incarnation is gone or changed (deleted or re-created
        through another process or instance; they stopped serving at once, this frees them)."""
        dropped = []
        for name, (uid, _) in list(self._entries.items()):
            if current_uid(name) != uid:
                self.drop(name, uid)
                dropped.append(name)
        return dropped

    def loaded(self) -> dict[str, Predictor]:
        return {n: e[1] for n, e in self._entries.items() if not isinstance(e[1], ApiError)}

    def is_loaded(self, version: Version) -> bool:
        entry = self._entries.get(version.name)
        return entry is not None and entry[0] == version.uid and not isinstance(entry[1], ApiError)
