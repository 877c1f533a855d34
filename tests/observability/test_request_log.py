"""AI Platform request-response logging: a version's requestLoggingConfig samples its online
:predict requests into a table with AI Platform's schema; without Google credentials the table
is in mlemu's store and `python app.py request-logs` reads it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from observability import request_log, request_log_store
from observability.metrics import Instruments
from observability.request_log import RequestLogger
from tests.conftest import ROOT
from tests.kit import modelkit

ROW = [5.1, 3.5, 1.4, 0.2]
TABLE = "my-project.ml_logs.iris_requests"


def logging_config(rate: float) -> dict[str, Any]:
    return {"samplingPercentage": rate, "bigqueryTableName": TABLE}


@pytest.fixture
def client(make_app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # No Google credentials (and no metadata server probe): rows go to the store.
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    modelkit.sklearn_model(tmp_path / "sk", "logreg", features=4)
    uri = str(tmp_path / "sk")
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {"iris": {
        "defaultVersion": "all",
        "versions": {
            "all": {"deploymentUri": uri, "requestLoggingConfig": logging_config(1.0)},
            "none": {"deploymentUri": uri, "requestLoggingConfig": logging_config(0.0)},
            "some": {"deploymentUri": uri, "requestLoggingConfig": logging_config(0.3)},
            "off": {"deploymentUri": uri},
        }}})
    return make_app(config)


def predict(client: Any, version: str, rows: list[list[float]], **extra: Any) -> Any:
    answer = client.post(f"/v1/projects/p/models/iris/versions/{version}:predict",
                         json={"instances": rows, **extra})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_json()


def rows_of(client: Any, version: str) -> list[dict[str, Any]]:
    client.emu.request_log.drain()
    return request_log.read(client.emu.store, [f"projects/p/models/iris/versions/{version}"], 0)


def cli(state_dir: Path, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run([sys.executable, str(ROOT / "app.py"), "request-logs", *args,
                          "--state-dir", str(state_dir)], capture_output=True, text=True,
                         check=True, env={"MLEMU_PROJECT": "p", "PATH": "/usr/bin:/bin"})
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_sampling_one_logs_every_request_with_the_table_schema(client: Any) -> None:
    answers = [predict(client, "all", [ROW, [6.0, 2.9, 4.5, 1.5]]) for _ in range(20)]
    answers.append(client.post("/v1/projects/p/models/iris:predict",  # default version, via Flask
                               json={"instances": [ROW]}, query_string={"fields": "predictions"}
                               ).get_json())
    rows = rows_of(client, "all")
    assert len(rows) == 21
    for row, answer in zip(rows, answers, strict=True):
        assert set(row) == {*request_log.FIELDS, "bigquery_table_name"}
        assert row["model"] == "iris" and row["model_version"] == "all"
        assert row["bigquery_table_name"] == TABLE and row["groundtruth"] is None
        assert json.loads(row["raw_prediction"]) == answer
        assert row["time"].endswith("Z")
    assert json.loads(rows[0]["raw_data"]) == {"instances": [ROW, [6.0, 2.9, 4.5, 1.5]]}
    # the documented command reads the same rows, newest last, in the table's own columns
    state = client.emu.settings.state_dir
    printed = cli(state, "iris", "--version", "all", "--limit", "5")
    assert printed == [{k: r[k] for k in request_log.FIELDS} for r in rows[-5:]]
    assert len(cli(state, "iris", "--limit", "0")) == 21


def test_sampling_zero_and_no_config_log_nothing(client: Any) -> None:
    for _ in range(30):
        predict(client, "none", [ROW])
        predict(client, "off", [ROW])
    assert rows_of(client, "none") == [] and rows_of(client, "off") == []


def test_sampling_a_fraction_logs_about_that_fraction(client: Any) -> None:
    sent = 1000
    for _ in range(sent):
        predict(client, "some", [ROW])
    logged = len(rows_of(client, "some"))
    # Binomial(1000, 0.3): mean 300, standard deviation 14.5; these bounds are 5 deviations.
    assert 227 <= logged <= 373


def test_a_patched_config_takes_effect(client: Any) -> None:
    answer = client.patch("/v1/projects/p/models/iris/versions/off",
                          query_string={"updateMask": "requestLoggingConfig"},
                          json={"requestLoggingConfig": logging_config(1.0)})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    client.emu.tasks.wait_idle(30)
    predict(client, "off", [ROW], )
    assert len(rows_of(client, "off")) == 1


class _BlockingStore:
    """A store whose writes wait until released (to fill the writer's queue)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.rows: list[tuple[str, str, dict[str, Any]]] = []
        self.index: dict[str, Any] | None = None

    def transaction(self) -> Any:
        self.release.wait(30)
        return _Nothing()

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.index if name == request_log_store.INDEX else None

    def put(self, kind: str, name: str, parent: str, body: dict[str, Any]) -> None:
        if name == request_log_store.INDEX:
            self.index = body
        else:
            self.rows.append((kind, parent, body))


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def test_a_full_queue_drops_rows_and_counts_them() -> None:
    store = _BlockingStore()
    instruments = Instruments()
    one = len('{"instances":[[5.1,3.5,1.4,0.2]]}{"predictions":[0]}' + TABLE)
    logger = RequestLogger(store, "store", queue_bytes=3 * one,  # type: ignore[arg-type]
                           instruments=instruments)
    name = "projects/p/models/iris/versions/v1"
    for _ in range(10):  # never blocks: rows being written count until written: three fit
        logger.offer(name, logging_config(1.0), [ROW], {}, [0])
    registry = instruments.registry
    assert registry.get_sample_value("mlemu_request_log_dropped_total",
                                     {"reason": "queue_full"}) >= 6
    store.release.set()
    logger.drain()
    written = registry.get_sample_value("mlemu_request_log_rows_total", {"destination": "store"})
    assert written == len(store.rows)
    assert len(store.rows) == 3
    assert all(kind == request_log.KIND and parent == name for kind, parent, _ in store.rows)


class _BigQuery:
    def __init__(self) -> None:
        self.inserted: list[tuple[str, list[dict[str, Any]]]] = []

    def insert_rows_json(self, table: str, rows: list[dict[str, Any]]) -> list[Any]:
        self.inserted.append((table, rows))
        return []


def test_with_credentials_rows_go_to_the_named_bigquery_table() -> None:
    store = _BlockingStore()
    store.release.set()
    logger = RequestLogger(store, "auto")  # type: ignore[arg-type]
    logger._bigquery = bigquery = _BigQuery()  # what google.auth.default() credentials give
    logger.offer("projects/p/models/iris/versions/v1", logging_config(1.0), [ROW], {"k": 1}, [2])
    logger.drain()
    assert store.rows == []
    [(table, [row])] = bigquery.inserted
    assert table == TABLE
    assert list(row) == list(request_log.FIELDS)
    assert json.loads(row["raw_data"]) == {"instances": [ROW], "k": 1}
    assert json.loads(row["raw_prediction"]) == {"predictions": [2]}


def test_bigquery_asked_for_without_credentials_drops_and_counts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    store = _BlockingStore()
    store.release.set()
    instruments = Instruments()
    logger = RequestLogger(store, "bigquery", instruments=instruments)  # type: ignore[arg-type]
    for _ in range(2):
        logger.offer("projects/p/models/iris/versions/v1", logging_config(1.0), [ROW], {}, [0])
        logger.drain()
    assert store.rows == []
    assert instruments.registry.get_sample_value("mlemu_request_log_dropped_total",
                                                 {"reason": "write_error"}) == 2
