"""The per-version instruments that record mlemu's metrics (defined in metric_defs.py).

prometheus_client keeps metric values per process; under gunicorn (several workers) and beside
the gRPC process they are shared through multiprocess mode: every process writes its values to
files in one directory (`Settings.metrics_dir`, emptied by `app.py serve` at start and named by
PROMETHEUS_MULTIPROC_DIR before prometheus_client is imported), gunicorn's `child_exit` hook
marks a dead worker's live gauges gone, and GET /metrics merges the files (exposition.py).
Without that variable (tests' in-process apps) each Emulator's metrics live in its own
registry (`Instruments.registry`), with the standard process collector.

Label values are bounded: model and version labels come from the registry (a request naming an
unknown model is recorded with empty model and version), protocol and method from fixed sets
(http.py, grpc.py). The hot path records through a `Tally` (tally.py): a dict lookup and a few
list updates per event, no lock; a request's count and latency share one row (keyed by its
label tuple), and so do a model call's latency and instances.

What is kept for a version follows the load: once it is unloaded, `Instruments.forget` drops its
instruments, rows and (in multiprocess mode) label children; its values stay where they are read
back from when it loads again (docs/performance.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.process_collector import ProcessCollector

from observability import metric_files
from observability.metric_defs import (
    BATCH_BOUNDS,
    COUNT_BOUNDS,
    LATENCY_BOUNDS,
    REQUEST_CHILDREN,
    Metrics,
    multiprocess,
    short_names,
)
from observability.tally import Tally
from observability.tally_rows import Pair


def _rows(instances: Any) -> int:
    """Instances of a model call: a list's or array's length; for named columns (TensorFlow's
    tensor-native calls), the first column's."""
    if isinstance(instances, dict):
        instances = next(iter(instances.values()), ())
    try:
        return len(instances)
    except TypeError:
        return 1


class _Merging(threading.local):
    """`on` in a thread while batching's merged call runs there. A class default rather than
    getattr(local, "on", False): that raised and caught an AttributeError on every model call
    in a thread that never merged."""

    on = False


class VersionInstruments:
    """The label children of one model version, resolved once (a dict lookup per use)."""

    def __init__(self, metrics: Metrics, tally: Tally, merging: _Merging, model: str,
                 version: str) -> None:
        self.tally = tally
        self._merging = merging
        self.model, self.version = model, version
        labels = (model, version)
        self.call_seconds = metrics.model_call_seconds.labels(*labels)
        self.instances = metrics.instances.labels(*labels)
        self.batch_requests = metrics.batch_requests.labels(*labels)
        self.batch_instances = metrics.batch_instances.labels(*labels)
        self.batch_wait = metrics.batch_wait.labels(*labels)
        self.loaded = metrics.models_loaded.labels(*labels)
        self.load_seconds = metrics.load_seconds.labels(*labels)
        self.load_failures = metrics.load_failures.labels(*labels)
        self.evictions = metrics.evictions.labels(*labels)
        #: A model call's latency and its instances, recorded in one row (outside a merge).
        self._call = Pair(self.call_seconds, LATENCY_BOUNDS, self.instances, COUNT_BOUNDS)
        #: `waited(seconds)`: a request's wait in batching's queue (one call per request).
        self.waited: Callable[[float], None] = tally.recorder(self.batch_wait, LATENCY_BOUNDS)

    def keys(self) -> tuple[Any, ...]:
        """What this version's tally rows are keyed by."""
        return (self.call_seconds, self.instances, self.batch_requests, self.batch_instances,
                self.batch_wait, self._call)

    def model_call(self, seconds: float, instances: Any) -> None:
        """A model call timed by a wrapper that cannot tell whether it runs merged
        (observability/instrument.py around custom code; dataplane/vertex.py): the merging flag
        says which of `call_merged` and `call_alone` it is (their bodies, inline)."""
        if self._merging.on:  # each merged request's instances were counted by merged_call
            self.tally.observe(self.call_seconds, LATENCY_BOUNDS, seconds)
        else:  # a list's length without a call to _rows: the most frequent instances
            self.tally.observe_pair(self._call, seconds, len(instances)
                                    if type(instances) is list else _rows(instances))

    def call_alone(self, seconds: float, instances: Any) -> None:
        """A model call batching ran for one request alone (it knows; no flag to read): its
        latency and its instances, in one row."""
        self.tally.observe_pair(self._call, seconds, len(instances)
                                if type(instances) is list else _rows(instances))

    def call_merged(self, seconds: float, instances: Any) -> None:
        """The model call of a merged batch: its latency only (each merged request's
        instances were counted by merged_call)."""
        self.tally.observe(self.call_seconds, LATENCY_BOUNDS, seconds)

    @contextmanager
    def merged_call(self, sizes: list[int]) -> Iterator[None]:
        """Around adaptive batching's merged call: each request's own size is its instances."""
        tally = self.tally
        tally.observe(self.batch_requests, BATCH_BOUNDS, len(sizes))
        tally.observe(self.batch_instances, COUNT_BOUNDS, sum(sizes))
        tally.observe_each(self.instances, COUNT_BOUNDS, sizes)
        self._merging.on = True
        try:
            yield
        finally:
            self._merging.on = False


class Instruments:
    """What one Emulator records with; absent (None on the Emulator) when metrics are off."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.tally = Tally()
        #: Set in a thread while batching's merged call runs (its requests are counted apart).
        self._merging = _Merging()
        self._versions: dict[str, VersionInstruments] = {}
        self._requests: dict[tuple[str, ...], tuple[Any, Any]] = {}
        #: (model, version) labels -> the tally keys handed out for them (what `forget` retires).
        self._handed: dict[tuple[str, str], set[Any]] = {}
        self._forget_lock = threading.Lock()
        #: `request(labels, seconds)`: one request served, its labels (transport, protocol,
        #: method, model, version, code) and latency; its count and latency are one event,
        #: recorded in one tally row keyed by the label tuple (Tally.counted).
        self.request: Callable[[tuple[str, ...], float], None] = self.tally.counted(
            self.request_children, LATENCY_BOUNDS)
        self._process = ProcessCollector(registry=None)
        self._process_lock = threading.Lock()
        self._process_read = 0.0

    def version(self, version_name: str) -> VersionInstruments:
        found = self._versions.get(version_name)
        if found is None:
            found = self._versions.setdefault(version_name, VersionInstruments(
                self.metrics, self.tally, self._merging, *short_names(version_name)))
            self._handed.setdefault((found.model, found.version), set()).update(found.keys())
        return found

    def request_children(self, key: tuple[str, ...]) -> tuple[Any, Any]:
        """The request counter's and latency histogram's children of a label tuple (transport,
        protocol, method, model, version, code), cached: prometheus_client's `labels()`
        validates and joins the values under a lock on every call. Asked by `request` only the
        first time a thread records a tuple. The cache is bounded (REQUEST_CHILDREN label
        tuples, then it starts over): label values are bounded by the registry, but deleted
        versions' tuples must not pile up. Starting over costs nothing but lookups: `labels()`
        gives the same child objects again, so their values go on."""
        found = self._requests.get(key)
        if found is not None:
            return found
        if len(self._requests) >= REQUEST_CHILDREN:
            self._requests.clear()
        children = self._requests.setdefault(key, (
            self.metrics.requests.labels(*key), self.metrics.request_seconds.labels(*key[:5])))
        self._handed.setdefault((key[3], key[4]), set()).add(key)  # its tally row's key
        return children

    def held(self) -> set[tuple[str, str]]:
        """(model, version) labels this process keeps instruments or request children for."""
        return set(self._handed) | {(v.model, v.version) for v in list(self._versions.values())}

    def forget(self, in_use: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """Keep nothing in this process for (model, version) labels not in `in_use` (versions no
        longer loaded): their instruments, cached request children and tally rows go (the rows
        flushed first: tally.retire), and in multiprocess mode their label children too (their
        values stay in the files, and a child made again reads its value back: metric_values.py).
        In one process the children are the values, so they stay. Rows of children no longer
        handed out (a request that finished on an unloaded model) go too. The labels forgotten."""
        with self._forget_lock:
            gone = {labels for labels in list(self._handed) if labels not in in_use and any(labels)}
            keys = [key for labels in gone for key in self._handed.pop(labels, ())]
            for name, found in list(self._versions.items()):
                if (found.model, found.version) in gone:
                    self._versions.pop(name, None)
            for key in list(self._requests):
                if key[3:5] in gone:
                    self._requests.pop(key, None)
            live = set().union(*self._handed.values())
            keys += [key for key in self.tally.recorded() if key not in live]
            self.tally.retire(keys)
            if multiprocess():
                for model, version in gone:
                    for metric in self.metrics.by_version:
                        metric.remove(model, version)
                    for metric in self.metrics.with_version:
                        metric.remove_by_labels({"model": model, "version": version})
                # After the retired rows' last flush (this tick's retire): the forgotten
                # versions' series are not written again unless they load again.
                metric_files.release_pages()
        return sorted(gone)

    def flush(self) -> None:
        """Bring prometheus_client's values up to date (before this process answers a scrape)."""
        self.tally.flush()

    def operation(self, task_type: str, state: str | None) -> None:
        """A task started (state None) or finished in `state`."""
        running = self.metrics.operations_running.labels(task_type)
        if state is None:
            running.inc()
        else:
            running.dec()
            self.metrics.operations.labels(task_type, state).inc()

    def update_process(self, min_interval_s: float = 1.0) -> None:
        """Publish this process's memory and CPU figures (at most once per interval); only
        in multiprocess mode (in one process the registry's ProcessCollector reads them)."""
        now = time.monotonic()
        if not self.metrics.process or now - self._process_read < min_interval_s:
            return
        if not self._process_lock.acquire(blocking=False):
            return
        try:
            self._process_read = now
            for family in self._process.collect():
                for sample in family.samples:
                    gauge = self.metrics.process.get(sample.name)
                    if gauge is not None:
                        gauge.set(sample.value)
        finally:
            self._process_lock.release()
