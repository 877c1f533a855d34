"""The journal's opt-in bodies: off by default, bounded when on, for the :predict fast path and
every other route alike; settings validated; a reset turns them off again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kit import modelkit

ROWS = [[0.5, -1.0, 2.0, 0.1], [-2.0, 0.3, -0.7, 1.5]]


@pytest.fixture
def client(tmp_path: Path, make_app: Callable[..., Any]) -> Any:
    modelkit.sklearn_model(tmp_path / "iris")
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(tmp_path / "iris")}}}}, project="mlemu")
    return make_app(config)


def test_bodies_are_kept_only_when_asked_and_only_so_much(client: Any) -> None:
    predict = "/v1/projects/mlemu/models/iris:predict"
    assert client.post(predict, json={"instances": ROWS}).status_code == 200
    [plain] = client.get("/_mlemu/requests").get_json()["requests"]
    assert "requestBody" not in plain and plain["instanceCount"] == 2
    settings = client.put("/_mlemu/requests/settings",
                          json={"recordBodies": True, "maxBodyBytes": 20})
    assert settings.get_json() == {"recordBodies": True, "maxBodyBytes": 20, "maxRows": 1000}
    answer = client.post(predict, json={"instances": ROWS})
    assert answer.get_data()  # the entry is written once the answer was sent
    assert client.post("/v1/models/iris:predict", json={"instances": ROWS}).get_data()
    rows = client.get("/_mlemu/requests").get_json()["requests"][1:]
    assert [r["protocol"] for r in rows] == ["aiplatform", "tfserving"]
    assert rows[0]["requestBody"] == '{"instances": [[0.5,'[:20]
    assert rows[0]["responseBody"] == answer.get_data(as_text=True)[:20]
    assert rows[0]["instanceCount"] == 2 and rows[0]["status"] == 200
    assert len(rows[1]["requestBody"]) == 20 and len(rows[1]["responseBody"]) <= 20
    client.post("/_mlemu/reset", json={})
    assert client.get("/_mlemu/requests/settings").get_json()["recordBodies"] is False


@pytest.mark.parametrize("body", [{"recordBodies": "yes"}, {"maxBodyBytes": 0},
                                  {"maxBodyBytes": 10 << 20}, {"other": 1}, []])
def test_bad_journal_settings_are_refused(client: Any, body: Any) -> None:
    answer = client.put("/_mlemu/requests/settings", json=body)
    assert answer.status_code == 400
    assert answer.get_json()["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("query", ["colour=red", "since=yesterday", "limit=0", "limit=x"])
def test_bad_journal_queries_are_refused(client: Any, query: str) -> None:
    answer = client.get(f"/_mlemu/requests?{query}")
    assert answer.status_code == 400
    assert answer.get_json()["error"]["status"] == "INVALID_ARGUMENT"
