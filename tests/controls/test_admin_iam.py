"""The admin surface under IAM `enforce`: `mlemu.admin` (roles/mlemu.admin or roles/owner on the
project) is needed; anyone else gets Google's 401/403, and nothing changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kit import iamkit

CALLS = [("POST", "/_mlemu/reset", {}), ("GET", "/_mlemu/snapshot", None),
         ("POST", "/_mlemu/snapshot", None), ("POST", "/_mlemu/faults", {"delayMs": 1}),
         ("GET", "/_mlemu/faults", None), ("DELETE", "/_mlemu/faults", None),
         ("DELETE", "/_mlemu/faults/1", None),
         ("PUT", "/_mlemu/timing", {"operationType": "CREATE_VERSION"}),
         ("GET", "/_mlemu/timing", None), ("DELETE", "/_mlemu/timing", None),
         ("GET", "/_mlemu/requests", None), ("DELETE", "/_mlemu/requests", None),
         ("GET", "/_mlemu/requests/settings", None),
         ("PUT", "/_mlemu/requests/settings", {"recordBodies": True})]


@pytest.fixture
def client(make_app: Any, tmp_path: Path) -> Any:
    iam = iamkit.write_config(tmp_path / "iam.yaml", {
        "staticTokens": {"ops": "user:ops@example.com", "owner": "user:owner@example.com",
                         "dev": "user:dev@example.com"},
        "projects": {"p": {"bindings": [
            {"role": "roles/mlemu.admin", "members": ["user:ops@example.com"]},
            {"role": "roles/owner", "members": ["user:owner@example.com"]},
            {"role": "roles/ml.admin", "members": ["user:dev@example.com"]}]}},
    })
    return make_app(iam_mode="enforce", iam_config=iam, default_project="p")


@pytest.mark.parametrize("method, path, body", CALLS)
def test_without_the_admin_permission_every_control_is_refused(
        client: Any, method: str, path: str, body: Any) -> None:
    anonymous = client.open(path, method=method, json=body)
    assert anonymous.status_code == 401
    assert anonymous.get_json()["error"]["status"] == "UNAUTHENTICATED"
    developer = client.open(path, method=method, json=body, headers=iamkit.bearer("dev"))
    assert developer.status_code == 403
    error = developer.get_json()["error"]
    assert error["status"] == "PERMISSION_DENIED" and "mlemu.admin" in error["message"]


def test_the_admin_role_and_owners_may_use_the_controls(client: Any) -> None:
    for token in ("ops", "owner"):
        added = client.post("/_mlemu/faults", json={"match": {"model": "m"}, "delayMs": 1},
                            headers=iamkit.bearer(token))
        assert added.status_code == 200, added.get_json()
    listed = client.get("/_mlemu/faults", headers=iamkit.bearer("ops")).get_json()["faults"]
    assert len(listed) == 2  # the refused calls above added nothing
    assert client.post("/_mlemu/reset", json={}, headers=iamkit.bearer("ops")).status_code == 200
    assert client.get("/_mlemu/faults", headers=iamkit.bearer("owner")).get_json() == {
        "faults": []}


def test_a_project_reset_needs_the_permission_on_that_project(client: Any) -> None:
    other = client.post("/_mlemu/reset", json={"project": "q"}, headers=iamkit.bearer("ops"))
    assert other.status_code == 403
    assert "projects/q" in other.get_json()["error"]["message"]
    assert client.post("/_mlemu/reset", json={"project": "p"},
                       headers=iamkit.bearer("ops")).status_code == 200


def test_the_controls_unknown_routes_and_worker_errors_are_googles_shape(client: Any) -> None:
    from deploy.wire_errors import body_for

    missing = client.get("/_mlemu/nothing", headers=iamkit.bearer("ops"))
    assert missing.status_code == 404 and missing.get_json()["error"]["status"] == "NOT_FOUND"
    wrong = client.patch("/_mlemu/faults", headers=iamkit.bearer("ops"))
    assert wrong.status_code == 405 and wrong.get_json()["error"]["code"] == 405
    worker = body_for("/_mlemu/requests", 431, "Request Header Fields Too Large")
    assert b'"status": "INVALID_ARGUMENT"' in worker


def test_the_journal_names_the_verified_caller(client: Any) -> None:
    client.get("/v1/projects/p/models", headers=iamkit.bearer("dev"))
    [call] = client.get("/_mlemu/requests?method=models.list",
                        headers=iamkit.bearer("ops")).get_json()["requests"]
    assert (call["caller"], call["project"], call["status"]) == ("user:dev@example.com", "p", 200)
