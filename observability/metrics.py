"""Prometheus metric definitions and the per-version instruments that record them.

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
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from observability import metric_files
from observability.tally import Pair, Tally, bounds

# Metric files that cannot be written (a full or read-only disk) must not kill the process.
metric_files.install()

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0, 60.0)
_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384)
_BATCH = _COUNTS[:8]
LATENCY_BOUNDS, COUNT_BOUNDS, BATCH_BOUNDS = bounds(_LATENCY), bounds(_COUNTS), bounds(_BATCH)
_VERSION = ("model", "version")
#: Label tuples whose request children `Instruments.request_children` keeps at most.
REQUEST_CHILDREN = 4096
_REQUEST = ("transport", "protocol", "method", "model", "version")
#: The standard process collector's figures, as gauges each process publishes under
#: multiprocess mode (it reads only its own process); a `pid` label tells them apart.
_PROCESS = {
    "process_resident_memory_bytes": "Resident memory size in bytes.",
    "process_virtual_memory_bytes": "Virtual memory size in bytes.",
    "process_cpu_seconds_total": "Total user and system CPU time spent in seconds.",
    "process_open_fds": "Number of open file descriptors.",
    "process_start_time_seconds": "Start time of the process since unix epoch in seconds.",
}


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


def short_names(version_name: str) -> tuple[str, str]:
    """("model", "version") of projects/P/models/M/versions/V."""
    parts = version_name.split("/")
    return (parts[3], parts[5]) if len(parts) >= 6 else ("", "")


class Metrics:
    """Every metric mlemu exposes (docs/observability.md), registered in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.requests = Counter("mlemu_requests", "Requests served, by transport (http, grpc), "
                                "protocol, method, model, version and status code.",
                                (*_REQUEST, "code"), registry=r)
        self.request_seconds = Histogram("mlemu_request_duration_seconds", "Whole request "
                                         "latency (body read to answer built).", _REQUEST,
                                         buckets=_LATENCY, registry=r)
        self.model_call_seconds = Histogram("mlemu_model_call_duration_seconds", "Latency of one "
                                            "call into the model (a merged batch is one call).",
                                            _VERSION, buckets=_LATENCY, registry=r)
        self.instances = Histogram("mlemu_instances_per_request", "Instances (rows) per "
                                   "prediction request.", _VERSION, buckets=_COUNTS, registry=r)
        self.batch_requests = Histogram("mlemu_batch_merged_requests", "Requests merged into one "
                                        "model call by adaptive batching.", _VERSION,
                                        buckets=_BATCH, registry=r)
        self.batch_instances = Histogram("mlemu_batch_merged_instances", "Instances of one merged "
                                         "model call.", _VERSION, buckets=_COUNTS, registry=r)
        self.batch_wait = Histogram("mlemu_batch_queue_wait_seconds", "Time a request waited for "
                                    "the model call in flight before its batch ran.", _VERSION,
                                    buckets=_LATENCY, registry=r)
        self.models_loaded = Gauge("mlemu_models_loaded", "Model versions loaded, summed over "
                                   "live processes (each process loads its own copy).", _VERSION,
                                   multiprocess_mode="livesum", registry=r)
        self.models_loaded_bytes = Gauge("mlemu_models_loaded_bytes", "Estimated memory of the "
                                         "model versions loaded (registry/footprint.py), summed "
                                         "over live processes.", multiprocess_mode="livesum",
                                         registry=r)
        self.evictions = Counter("mlemu_model_evictions", "Loaded versions unloaded by the caps "
                                 "on loaded versions or their memory (least recently used).",
                                 _VERSION, registry=r)
        self.load_seconds = Histogram("mlemu_model_load_duration_seconds", "Time to load a model "
                                      "version.", _VERSION, buckets=_LATENCY, registry=r)
        self.load_failures = Counter("mlemu_model_load_failures", "Model loads that failed.",
                                     _VERSION, registry=r)
        self.operations = Counter("mlemu_operations", "Long-running operations and jobs "
                                  "finished, by type and final state.", ("type", "state"),
                                  registry=r)
        self.operations_running = Gauge("mlemu_operations_running", "Long-running operations and "
                                        "jobs running now.", ("type",),
                                        multiprocess_mode="livesum", registry=r)
        self.request_log_rows = Counter("mlemu_request_log_rows", "Request-response log rows "
                                        "written, by destination (bigquery, store).",
                                        ("destination",), registry=r)
        self.request_log_dropped = Counter("mlemu_request_log_dropped", "Request-response log "
                                           "rows dropped, by reason (queue_full, write_error).",
                                           ("reason",), registry=r)
        if multiprocess():
            self.process = {name: Gauge(name, text, multiprocess_mode="liveall", registry=r)
                            for name, text in _PROCESS.items()}
        else:
            self.process = {}
            ProcessCollector(registry=r)


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
        return self._requests.setdefault(key, (
            self.metrics.requests.labels(*key), self.metrics.request_seconds.labels(*key[:5])))

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
