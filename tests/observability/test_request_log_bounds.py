"""Request-response logging within bounds: the config is validated as the ml v1 API defines it,
a row and the writer's queue are bounded in bytes, the store keeps at most its budget (oldest
rows go first), rows go with their version, and reading the newest N rows reads only those."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from observability import request_log, request_log_store
from observability.metrics import Instruments
from observability.request_log import RequestLogger
from tests.kit import modelkit

TABLE = "my-project.ml_logs.iris_requests"
V = "/v1/projects/p/models/iris/versions"
ROW = [5.1, 3.5, 1.4, 0.2]


@pytest.fixture
def client(make_app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    modelkit.sklearn_model(tmp_path / "sk", "logreg", features=4)
    uri = str(tmp_path / "sk")
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {"iris": {
        "defaultVersion": "keep", "versions": {"keep": {"deploymentUri": uri},
                                               "gone": {"deploymentUri": uri}}}})
    return make_app(config, request_log_max_bytes=2_000_000)


def patch(client: Any, version: str, config: Any) -> Any:
    return client.patch(f"{V}/{version}", query_string={"updateMask": "requestLoggingConfig"},
                        json={"requestLoggingConfig": config})


@pytest.mark.parametrize("config, field", [
    ({"samplingPercentage": 5, "bigqueryTableName": TABLE}, "sampling_percentage"),
    ({"samplingPercentage": -1, "bigqueryTableName": TABLE}, "sampling_percentage"),
    ({"samplingPercentage": "NaN", "bigqueryTableName": TABLE}, "sampling_percentage"),
    ({"samplingPercentage": "abc", "bigqueryTableName": TABLE}, "sampling_percentage"),
    ({"samplingPercentage": True, "bigqueryTableName": TABLE}, "sampling_percentage"),
    ({"samplingPercentage": 0.5}, "bigquery_table_name"),
    ({"samplingPercentage": 0.5, "bigqueryTableName": "x" * 1_000_000}, "bigquery_table_name"),
    ({"samplingPercentage": 0.5, "bigqueryTableName": "just_a_table"}, "bigquery_table_name"),
    ({"samplingPercentage": 0.5, "bigqueryTableName": TABLE, "everything": 1}, "everything"),
    ("all of it", "equestLoggingConfig"),
])
def test_configs_the_api_would_refuse_are_refused(client: Any, config: Any, field: str) -> None:
    answer = patch(client, "keep", config)
    assert answer.status_code == 400, answer.get_json()
    message = answer.get_json()["error"]["message"]
    assert field in message and len(message) < 400, message
    created = client.post(V, json={"name": "new", "deploymentUri": "x",
                                   "requestLoggingConfig": config})
    assert created.status_code == 400, created.get_json()


def test_a_valid_config_is_kept_and_an_empty_one_turns_logging_off(client: Any) -> None:
    for config in ({"samplingPercentage": 0.25, "bigqueryTableName": TABLE},
                   {"samplingPercentage": 1, "bigqueryTableName": "example.com:proj-1.d_2.t-3"},
                   {}):
        answer = patch(client, "keep", config)
        assert answer.status_code == 200, answer.get_json()
        assert client.emu.tasks.wait_idle(30)
        version = client.get(f"{V}/keep").get_json()
        assert version.get("requestLoggingConfig") in (config, None)


@pytest.mark.parametrize("stored", [{"samplingPercentage": math.nan}, {"samplingPercentage": "1"},
                                    {"samplingPercentage": True}, {"samplingPercentage": 2},
                                    {"samplingPercentage": math.inf}, "1", None])
def test_a_stored_config_that_is_not_valid_samples_nothing(stored: Any) -> None:
    assert request_log.sampling_rate(stored) == 0.0


class _Store:
    """In memory, counting what is read."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[str, dict[str, Any]]] = {}
        self.gets = self.children_calls = 0

    def transaction(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        return self.docs.get(name, ("", None))[1]  # type: ignore[return-value]

    def children(self, kind: str, parent: str) -> list[dict[str, Any]]:
        self.children_calls += 1
        return [body for name, (p, body) in sorted(self.docs.items()) if p == parent]

    def put(self, kind: str, name: str, parent: str, body: dict[str, Any]) -> None:
        self.docs[name] = (parent, json.loads(json.dumps(body)))

    def delete(self, kind: str, name: str) -> bool:
        return self.docs.pop(name, None) is not None

    def delete_children(self, kind: str, parent: str) -> int:
        names = [name for name, (p, _) in self.docs.items() if p == parent]
        for name in names:
            del self.docs[name]
        return len(names)


def _rows(store: _Store) -> list[dict[str, Any]]:
    return [body for name, (_, body) in store.docs.items() if name != request_log_store.INDEX]


def test_the_store_keeps_its_budget_newest_rows_first() -> None:
    store = _Store()
    version = "projects/p/models/m/versions/v"
    for n in range(50):
        request_log_store.append(store, [(version, {"n": n, "pad": "x" * 900}, 1000)], 10_000)
    kept = _rows(store)
    assert [row["n"] for row in kept] == list(range(40, 50))  # 10 rows of 1,000 bytes
    store.gets = 0
    assert [row["n"] for row in request_log_store.newest(store, [version], 1)] == [49]
    assert store.gets == 2 and store.children_calls == 0  # the index and that one row
    assert request_log_store.append(store, [(version, {"n": -1}, 20_000)], 10_000) == 1
    assert len(_rows(store)) == 10  # a row larger than the budget is not stored


def test_rows_larger_than_a_row_may_be_are_dropped_and_counted() -> None:
    store = _Store()
    instruments = Instruments()
    logger = RequestLogger(store, "store", instruments=instruments,  # type: ignore[arg-type]
                           max_bytes=100_000)
    config = {"samplingPercentage": 1.0, "bigqueryTableName": TABLE}
    logger.offer("projects/p/models/m/versions/v", config, [[0.5] * 30_000], {}, [1])
    logger.offer("projects/p/models/m/versions/v", config, [ROW], {}, [1])
    logger.drain()
    assert instruments.registry.get_sample_value("mlemu_request_log_dropped_total",
                                                 {"reason": "too_large"}) == 1
    assert [json.loads(r["raw_data"]) for r in _rows(store)] == [{"instances": [ROW]}]


def test_large_requests_stay_within_the_budget_and_go_with_their_version(client: Any) -> None:
    config = {"samplingPercentage": 1.0, "bigqueryTableName": TABLE}
    for version in ("keep", "gone"):
        assert patch(client, version, config).status_code == 200
        assert client.emu.tasks.wait_idle(30)
    big = [[float(i % 7) + 0.123456789, 1.5, -2.25, 3.0] for i in range(9_000)]  # ~400 KB
    for n in range(12):
        for version in ("keep", "gone"):
            answer = client.post(f"{V}/{version}:predict", json={"instances": big})
            assert answer.status_code == 200
    client.emu.request_log.drain()
    store = client.emu.store
    kept = store.children(request_log.KIND, "projects/p/models/iris/versions/keep") + \
        store.children(request_log.KIND, "projects/p/models/iris/versions/gone")
    stored = sum(len(json.dumps(row)) for row in kept)
    assert 0 < stored <= 2_000_000 * 1.01 and len(kept) < 24, (stored, len(kept))
    assert client.delete(f"{V}/gone").status_code == 200
    assert client.emu.tasks.wait_idle(30)
    assert store.children(request_log.KIND, "projects/p/models/iris/versions/gone") == []
    index = store.get(request_log.KIND, request_log_store.INDEX)
    assert {entry[0] for entry in index["rows"]} == {"projects/p/models/iris/versions/keep"}
    newest = request_log.read(store, ["projects/p/models/iris/versions/keep"], 1)
    assert len(newest) == 1 and json.loads(newest[0]["raw_data"]) == {"instances": big}
