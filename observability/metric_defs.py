"""The metrics mlemu exposes (docs/observability.md): their definitions, buckets and labels,
and the multiprocess switch. observability/metrics.py records into them.

Importing this module installs what prometheus_client's multiprocess mode needs here before any
metric is made: metric files safe on a full disk (metric_files.py) and values that a removed
label child frees (metric_values.py).
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from observability import metric_files, metric_values
from observability.tally import bounds

# Metric files that cannot be written (a full or read-only disk) must not kill the process;
# removed label children are freed (metric_values.py).
metric_files.install()
metric_values.install()

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
        #: Labelled by model and version only; and by them among others (the requests').
        self.by_version = (self.model_call_seconds, self.instances, self.batch_requests,
                           self.batch_instances, self.batch_wait, self.models_loaded,
                           self.evictions, self.load_seconds, self.load_failures)
        self.with_version = (self.requests, self.request_seconds)
        if multiprocess():
            self.process = {name: Gauge(name, text, multiprocess_mode="liveall", registry=r)
                            for name, text in _PROCESS.items()}
        else:
            self.process = {}
            ProcessCollector(registry=r)

