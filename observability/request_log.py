"""AI Platform request-response logging: a version's `requestLoggingConfig` acted on.

A version with `requestLoggingConfig {samplingPercentage, bigqueryTableName}` has that fraction
(0 to 1) of its online prediction requests, whichever protocol they came in on, written as
rows of AI Platform's table schema
(https://cloud.google.com/ai-platform/prediction/docs/online-predict#request-response-logging):
model, model_version, time, raw_data (the request body), raw_prediction (the response body) and
groundtruth (left empty, for the user to fill). Rows go to that BigQuery table when this process
has Google credentials (google-cloud-bigquery), otherwise to the `request_logs` table of mlemu's
own store with the same fields, read with `python app.py request-logs MODEL`.

Serving never waits for it: a sampled request puts one tuple on a bounded queue (encoding
happens in the writer thread); when the queue is full the row is dropped and counted in
`mlemu_request_log_dropped_total{reason="queue_full"}`, as is a failed write (`write_error`).
"""

from __future__ import annotations

import base64
import datetime
import itertools
import logging
import os
import queue
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core import wirejson

if TYPE_CHECKING:
    from observability.metrics import Instruments
    from registry.store import Store

log = logging.getLogger("mlemu.request_log")

KIND = "request_logs"
FIELDS = ("model", "model_version", "time", "raw_data", "raw_prediction", "groundtruth")
QUEUE_SIZE = 10_000
#: Rows written per store transaction or BigQuery insert.
BATCH = 500


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


class RequestLogger:
    """Samples requests of versions with a requestLoggingConfig and writes them off the request
    path (`sink`: "auto" = BigQuery with credentials else the store, "bigquery", "store")."""

    def __init__(self, store: Store, sink: str = "auto", capacity: int = QUEUE_SIZE,
                 rand: Callable[[], float] = random.random,
                 instruments: Instruments | None = None) -> None:
        self.store = store
        self.instruments = instruments
        self.sink = sink
        self._random = rand
        self._queue: queue.Queue[tuple[Any, ...]] = queue.Queue(capacity)
        self._started = False
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._bigquery: Any = None

    def offer(self, version_name: str, config: Any, instances: Any, parameters: dict[str, Any],
              predictions: Any) -> None:
        """Queue this request's row if its version samples it (cheap: no encoding here)."""
        if not isinstance(config, dict):
            return
        try:
            rate = float(config.get("samplingPercentage") or 0)
        except (TypeError, ValueError):
            return
        if rate <= 0 or (rate < 1 and self._random() >= rate):
            return
        item = (version_name, str(config.get("bigqueryTableName") or ""),
                datetime.datetime.now(datetime.UTC), instances, parameters, predictions)
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._count("dropped", "queue_full")
            return
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
        version_name, _, when, instances, parameters, predictions = item
        columnar = isinstance(instances, dict)
        parts = version_name.split("/")
        return {
            "model": parts[3], "model_version": parts[5],
            "time": when.isoformat().replace("+00:00", "Z"),
            # Named input tensors (the tensor protocols) are logged as TF Serving's columnar
            # request and response, {"inputs": ...} and {"outputs": ...}.
            "raw_data": _json({"inputs" if columnar else "instances": instances, **parameters}),
            "raw_prediction": _json({"outputs" if columnar else "predictions": predictions}),
            "groundtruth": None,
        }

    def _write(self, items: list[tuple[Any, ...]]) -> None:
        by_table: dict[str, list[dict[str, Any]]] = {}
        local: list[tuple[str, dict[str, Any]]] = []
        client = self._bigquery_client()
        for item in items:
            row = self.row(item)
            if client is not None and item[1].count(".") == 2:
                by_table.setdefault(item[1], []).append(row)
            else:
                local.append((item[0], {**row, "bigquery_table_name": item[1]}))
        for table, rows in by_table.items():
            errors = client.insert_rows_json(table, rows)
            if errors:
                raise RuntimeError(f"BigQuery refused rows of {table}: {errors[:3]}")
            self._count("rows", "bigquery", len(rows))
        if local:
            pid = os.getpid()
            with self.store.transaction():
                for version_name, row in local:
                    stamp = row["time"].replace(":", "").replace("-", "")
                    name = f"{version_name}/requestLogs/{stamp}-{pid}-{next(self._seq):09d}"
                    self.store.put(KIND, name, version_name, row)
            self._count("rows", "store", len(local))

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
    """The newest `limit` rows of these versions from the store, oldest first."""
    rows = [row for name in version_names for row in store.children(KIND, name)]
    rows.sort(key=lambda row: row["time"])
    return rows[-limit:] if limit > 0 else rows
