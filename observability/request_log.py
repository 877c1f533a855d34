"""AI Platform request-response logging: a version's `requestLoggingConfig` acted on.

A version with `requestLoggingConfig {samplingPercentage, bigqueryTableName}` has that fraction
(0 to 1) of its online prediction requests, whichever protocol they came in on, written as
rows of AI Platform's table schema
(https://cloud.google.com/ai-platform/prediction/docs/online-predict#request-response-logging):
model, model_version, time, raw_data (the request body), raw_prediction (the response body) and
groundtruth (left empty, for the user to fill). Rows go to that BigQuery table when this process
has Google credentials (google-cloud-bigquery), otherwise to the `request_logs` table of mlemu's
own store with the same fields, read with `python app.py request-logs MODEL`.

Serving never waits for it: a sampled request's row is encoded where it is offered (its bytes
are what is bounded: the request's Python objects would take ten times as much) and put on a
queue bounded in bytes (QUEUE_BYTES per process); a row larger than ROW_BYTES, or one that does
not fit in the queue, is dropped and counted in `mlemu_request_log_dropped_total{reason=
"too_large"|"queue_full"}`, as is a failed write (`write_error`) and a row the store's budget
pushed out (`retention`: observability/request_log_store.py). The configuration is validated
when a version is patched (controlplane/versions.py); offer() still reads a stored one warily:
anything but a number from 0 to 1 samples nothing.
"""

from __future__ import annotations

import base64
import datetime
import logging
import math
import queue
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core import wirejson
from observability import request_log_store

if TYPE_CHECKING:
    from observability.metrics import Instruments
    from registry.store import Store

log = logging.getLogger("mlemu.request_log")

KIND = request_log_store.KIND
FIELDS = ("model", "model_version", "time", "raw_data", "raw_prediction", "groundtruth")
QUEUE_SIZE = 10_000
#: Bytes of encoded rows a process holds waiting for the writer, at most.
QUEUE_BYTES = 32 * 1024 * 1024
#: Largest row kept: BigQuery's own limit on a streamed row ("Maximum row size: 10 MB",
#: https://cloud.google.com/bigquery/quotas#streaming_inserts); the real service logs nothing
#: for a request past BigQuery's limits and goes on serving (the ml v1 reference,
#: GoogleCloudMlV1__RequestLoggingConfig).
ROW_BYTES = 10 * 1000 * 1000
#: Longest bigqueryTableName kept in a row (a valid one is far shorter: controlplane checks it).
TABLE_NAME_BYTES = 1100
#: Rows written per store transaction or BigQuery insert.
BATCH = 500
#: The store's budget for rows when none is given (MLEMU_REQUEST_LOG_MAX_BYTES).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def _json(value: Any) -> str:
    try:
        return wirejson.dumps(value).decode()  # arrays too (wirejson converts them)
    except TypeError:  # bytes somewhere: convert the whole value (rare, so only then)
        return wirejson.dumps(_plain(value)).decode()


def _plain(value: Any) -> Any:
    """A request's or answer's value as JSON can hold it: arrays as lists, bytes (BYTES tensors,
    grps bin_data) as TF Serving's `{"b64": ...}`."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def sampling_rate(config: Any) -> float:
    """The fraction of requests a stored requestLoggingConfig samples: 0 unless it holds a
    number from 0 to 1 (a bool, a string, NaN or infinity sample nothing)."""
    rate = config.get("samplingPercentage") if isinstance(config, dict) else None
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate):
        return 0.0
    return float(rate) if 0 <= rate <= 1 else 0.0


class RequestLogger:
    """Samples requests of versions with a requestLoggingConfig and writes them off the request
    path (`sink`: "auto" = BigQuery with credentials else the store, "bigquery", "store"), the
    store's rows within `max_bytes` in all."""

    def __init__(self, store: Store, sink: str = "auto", queue_bytes: int = QUEUE_BYTES,
                 rand: Callable[[], float] = random.random,
                 instruments: Instruments | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.store = store
        self.instruments = instruments
        self.sink = sink
        self.max_bytes = max_bytes
        self.queue_bytes = queue_bytes
        self._random = rand
        self._queue: queue.Queue[tuple[Any, ...]] = queue.Queue(QUEUE_SIZE)
        self._queued = 0  # bytes of the rows queued or being written
        self._started = False
        self._lock = threading.Lock()
        self._bigquery: Any = None

    def offer(self, version_name: str, config: Any, instances: Any, parameters: dict[str, Any],
              predictions: Any) -> None:
        """Queue this request's row if its version samples it and it fits."""
        rate = sampling_rate(config)
        if rate <= 0 or (rate < 1 and self._random() >= rate):
            return
        table = config.get("bigqueryTableName")
        table = table if isinstance(table, str) and len(table) <= TABLE_NAME_BYTES else ""
        # Named input tensors (the tensor protocols) are logged as TF Serving's columnar request
        # and response, {"inputs": ...} and {"outputs": ...}.
        columnar = isinstance(instances, dict)
        raw_data = _json({"inputs" if columnar else "instances": instances, **parameters})
        raw_prediction = _json({"outputs" if columnar else "predictions": predictions})
        size = len(raw_data) + len(raw_prediction) + len(table)
        if size > min(ROW_BYTES, self.max_bytes):
            self._count("dropped", "too_large")
            return
        item = (version_name, table, datetime.datetime.now(datetime.UTC), raw_data,
                raw_prediction, size)
        with self._lock:
            if self._queued + size > self.queue_bytes or self._queue.full():
                self._count("dropped", "queue_full")
                return
            self._queued += size
            self._queue.put_nowait(item)
        if not self._started:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="mlemu-request-log", daemon=True).start()

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while len(items) < BATCH:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(items)
            except Exception as exc:  # noqa: BLE001 - logging must never stop, nor stop serving
                self._count("dropped", "write_error", len(items))
                log.warning("request-response logging: %d rows not written: %s", len(items), exc)
            finally:
                with self._lock:
                    self._queued -= sum(item[5] for item in items)
                for _ in items:
                    self._queue.task_done()

    def _count(self, what: str, label: str, amount: int = 1) -> None:
        if self.instruments is not None:
            metrics = self.instruments.metrics
            counter = metrics.request_log_rows if what == "rows" else metrics.request_log_dropped
            counter.labels(label).inc(amount)

    def drain(self) -> None:
        """Wait until every queued row is written or dropped (tests, shutdown)."""
        self._queue.join()

    def row(self, item: tuple[Any, ...]) -> dict[str, Any]:
        version_name, _, when, raw_data, raw_prediction, _ = item
        parts = version_name.split("/")
        return {
            "model": parts[3], "model_version": parts[5],
            "time": when.isoformat().replace("+00:00", "Z"),
            "raw_data": raw_data, "raw_prediction": raw_prediction, "groundtruth": None,
        }

    def _write(self, items: list[tuple[Any, ...]]) -> None:
        by_table: dict[str, list[dict[str, Any]]] = {}
        local: list[request_log_store.Row] = []
        client = self._bigquery_client()
        for item in items:
            row = self.row(item)
            if client is not None and item[1].count(".") == 2:
                by_table.setdefault(item[1], []).append(row)
            else:
                local.append((item[0], {**row, "bigquery_table_name": item[1]}, item[5]))
        for table, rows in by_table.items():
            errors = client.insert_rows_json(table, rows)
            if errors:
                raise RuntimeError(f"BigQuery refused rows of {table}: {errors[:3]}")
            self._count("rows", "bigquery", len(rows))
        if local:
            dropped = request_log_store.append(self.store, local, self.max_bytes)
            self._count("rows", "store", len(local))
            if dropped:
                self._count("dropped", "retention", dropped)

    def _bigquery_client(self) -> Any:
        """A BigQuery client when rows may go there (created once), else None."""
        if self.sink == "store":
            return None
        if self._bigquery is None:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError

            try:
                credentials, project = google.auth.default()
            except DefaultCredentialsError:
                if self.sink == "bigquery":  # asked for: every batch fails (and is counted)
                    raise
                self._bigquery = False
                log.info("request-response logging: no Google credentials, rows go to the store")
            else:
                from google.cloud.bigquery import Client

                self._bigquery = Client(project=project, credentials=credentials)
        return self._bigquery or None


def read(store: Store, version_names: list[str], limit: int) -> list[dict[str, Any]]:
    """The newest `limit` rows of these versions from the store (0: all), oldest first."""
    return list(request_log_store.newest(store, version_names, limit))
