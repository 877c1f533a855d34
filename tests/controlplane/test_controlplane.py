"""Control-plane rules through the in-process app: authorization before lookup, operations in
progress, cancellation, orphaned operations adopted (or failed after too many interruptions),
patches, and the list filter / paging rules."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from controlplane import listing
from core.errors import InvalidArgument
from registry import owners, tasks
from registry.resources import Operation, Version
from tests.kit import iamkit, modelkit
from tests.kit.mlclient import GATE_PREDICTOR, wait_for_file
from tests.kit.operations import wait_operation

M = "/v1/projects/p/models"


def _model_with_version(client: Any, tmp_path: Path, model: str = "m") -> None:
    modelkit.sklearn_model(tmp_path / "linear", kind="linreg")
    assert client.post(M, json={"name": model}).status_code == 200
    op = client.post(f"{M}/{model}/versions",
                     json={"name": "v1", "deploymentUri": str(tmp_path / "linear")}).json
    assert wait_operation(client, op)["response"]["state"] == "READY"


def test_enforce_mode_denies_before_any_lookup(make_app: Any, tmp_path: Path) -> None:
    """A verified caller without grants gets 403 on every method, whether or not the resource
    exists; a caller without credentials gets 401."""
    config = iamkit.write_config(tmp_path / "iam.yaml",
                                 {"staticTokens": {"nobody-token": "user:nobody@example.com"}})
    client = make_app(iam_mode="enforce", iam_config=config)
    calls = [("get", f"{M}/ghost"), ("post", M), ("get", M), ("patch", f"{M}/ghost"),
             ("delete", f"{M}/ghost"), ("post", f"{M}/ghost/versions"),
             ("get", f"{M}/ghost/versions/v"), ("post", f"{M}/ghost/versions/v:setDefault"),
             ("get", "/v1/projects/p/operations/x"), ("post", "/v1/projects/p/operations/x:cancel"),
             ("get", "/v1/projects/p/operations"), ("get", "/v1/projects/p:getConfig")]
    for method, path in calls:
        resp = getattr(client, method)(path, json={"name": "ghost"},
                                       headers=iamkit.bearer("nobody-token"))
        assert resp.status_code == 403, (method, path, resp.json)
        assert resp.json["error"]["status"] == "PERMISSION_DENIED"
        anonymous = getattr(client, method)(path, json={"name": "ghost"})
        assert anonymous.status_code == 401, (method, path, anonymous.json)
        assert anonymous.json["error"]["status"] == "UNAUTHENTICATED"


def test_operation_in_progress_blocks_changes_and_cancel_reverts(make_app: Any, tmp_path: Path) -> None:
    client = make_app()
    package = modelkit.custom_package(tmp_path / "pkg", module="gate_predictor",
                                      source=GATE_PREDICTOR, kind="dir")
    gated = tmp_path / "gated"
    gated.mkdir()
    client.post(M, json={"name": "m"})
    op = client.post(f"{M}/m/versions", json={
        "name": "slow", "deploymentUri": str(gated), "packageUris": [str(package)],
        "predictionClass": "gate_predictor.GatePredictor"}).json
    try:
        wait_for_file(gated / "started")
        assert client.get(f"{M}/m/versions/slow").json["state"] == "CREATING"
        refused = [
            client.delete(f"{M}/m/versions/slow"),
            client.patch(f"{M}/m/versions/slow?updateMask=description", json={"description": "x"}),
            client.delete(f"{M}/m"),
            client.patch(f"{M}/m?updateMask=description", json={"description": "x"}),
        ]
        for resp in refused:
            assert resp.status_code == 400, resp.json
            assert "has an operation in progress" in resp.json["error"]["message"]
        assert client.post(f"/v1/{op['name']}:cancel").json == {}
        cancelled = client.get(f"/v1/{op['name']}").json
        assert cancelled["done"] and cancelled["error"]["code"] == 1
        assert cancelled["metadata"]["isCancellationRequested"] is True
        version = client.get(f"{M}/m/versions/slow").json
        assert (version["state"], version["errorMessage"]) == ("FAILED", "Version creation was cancelled.")
    finally:
        (gated / "release").touch()
    # The interrupted load finishes later but must not overwrite the cancelled outcome.
    assert client.emu.tasks.wait_idle(30)
    assert client.get(f"{M}/m/versions/slow").json["state"] == "FAILED"
    assert wait_operation(client, client.delete(f"{M}/m/versions/slow").json).get("error") is None


def _orphan(client: Any, tmp_path: Path, owner: str, lease_until: float, attempts: int = 1) -> str:
    """A CREATING version whose operation's owner is gone, as a crashed instance leaves it."""
    modelkit.sklearn_model(tmp_path / "linear", kind="linreg")
    client.post(M, json={"name": "orphan"})
    store = client.emu.store
    version = Version(name="projects/p/models/orphan/versions/v1",
                      deployment_uri=str(tmp_path / "linear"))
    name = "projects/p/operations/create_orphan_v1-1"
    with store.transaction():
        store.put_version(version)
        store.put_operation(Operation(name=name, metadata={"operationType": "CREATE_VERSION"}))
        tasks.put(store, tasks.Task(name, "CREATE_VERSION", version.name, {"uid": version.uid},
                                    owner, lease_until, attempts))
    return name


def test_orphaned_operation_is_adopted_when_its_lease_expires(make_app: Any, tmp_path: Path) -> None:
    client = make_app()
    foreign = "elsewhere|boot|ns|4242|12345|abcd"
    name = _orphan(client, tmp_path, foreign, time.time() + 3600)
    client.emu.tasks.tick()
    assert tasks.get(client.emu.store, name).owner == foreign  # type: ignore[union-attr]
    # The other instance stopped renewing: its lease runs out and this instance takes over.
    task = tasks.get(client.emu.store, name)
    assert task is not None
    task.lease_until = time.time() - 1
    tasks.put(client.emu.store, task)
    client.emu.tasks.tick()
    done = wait_operation(client, client.get(f"/v1/{name}").json)
    assert done["response"]["state"] == "READY"
    assert client.get(f"{M}/orphan").json["defaultVersion"]["name"].endswith("/versions/v1")
    assert tasks.pending(client.emu.store) == []


def test_operation_interrupted_too_often_is_failed(make_app: Any, tmp_path: Path) -> None:
    client = make_app()
    name = _orphan(client, tmp_path, "elsewhere|b|n|1|1|x", time.time() - 1,
                   attempts=tasks.MAX_ATTEMPTS)
    client.emu.tasks.tick()
    op = client.get(f"/v1/{name}").json
    assert op["done"] and op["error"]["code"] == 10 and "interrupted 3 times" in op["error"]["message"]
    version = client.get(f"{M}/orphan/versions/v1").json
    assert version["state"] == "FAILED" and "interrupted" in version["errorMessage"]


def test_owner_identity() -> None:
    me = owners.this_owner()
    assert not owners.owner_is_dead(me)
    parts = me.split("|")
    assert owners.owner_is_dead("|".join([*parts[:4], "1", parts[5]]))  # pid reused by another
    assert owners.owner_is_dead("|".join([*parts[:3], "999999999", parts[4], parts[5]]))
    assert not owners.owner_is_dead("otherhost|b|n|1|1|x")  # unknowable: wait for the lease


def test_patches_and_default_switch(make_app: Any, tmp_path: Path) -> None:
    client = make_app()
    _model_with_version(client, tmp_path)
    modelkit.sklearn_model(tmp_path / "forest", kind="forest")
    wait_operation(client, client.post(f"{M}/m/versions", json={
        "name": "v2", "deploymentUri": str(tmp_path / "forest"), "labels": {"tier": "b"}}).json)
    op = client.patch(f"{M}/m/versions/v2?updateMask=labels,autoScaling.minNodes",
                      json={"labels": {"tier": "a"}, "autoScaling": {"minNodes": 2}}).json
    assert op["name"].startswith("projects/p/operations/update_m_v2-")
    version = wait_operation(client, op)["response"]
    assert version["labels"] == {"tier": "a"} and version["autoScaling"] == {"minNodes": 2}
    assert version["state"] == "READY"
    op = client.patch(f"{M}/m?updateMask=default_version.name",
                      json={"defaultVersion": {"name": "v2"}}).json
    assert wait_operation(client, op)["response"]["defaultVersion"]["name"].endswith("/versions/v2")
    before = client.get(f"{M}/m").json["etag"]
    client.post(f"{M}/m/versions/v1:setDefault")
    assert client.get(f"{M}/m").json["etag"] != before
    bad = client.post(f"{M}/m/versions/v1:setDefault", json={"x": 1})
    assert bad.status_code == 400
    # A version being patched keeps serving; one being deleted does not.
    store = client.emu.store
    for state, status in (("UPDATING", 200), ("DELETING", 400)):
        with store.transaction():
            version = store.get_version("projects/p/models/m/versions/v1")
            version.state = state
            store.put_version(version)
        resp = client.post(f"{M}/m:predict", json={"instances": [[1.0, 2.0, 3.0, 4.0]]})
        assert resp.status_code == status, resp.json


def test_filter_expressions() -> None:
    fields = ("name", "labels", "state", "isDefault", "metadata")
    items = [
        {"name": "a", "labels": {"team": "red", "env": "prod"}, "state": "READY", "isDefault": True},
        {"name": "b", "labels": {"team": "blue"}, "state": "FAILED"},
        {"name": "c", "state": "READY", "metadata": {"operationType": "DELETE_VERSION"}},
    ]

    def names(spec: str) -> list[str]:
        pred = listing.compile_filter(spec, fields)
        return [i["name"] for i in items if pred(i)]

    assert names("labels.team = red") == ["a"]
    assert names('labels.team="blue" OR state=READY') == ["a", "b", "c"]
    assert names("state=READY labels:env") == ["a"]
    assert names("state=READY AND NOT labels.team=red") == ["c"]
    assert names("-state=READY") == ["b"]
    assert names("(state=FAILED OR isDefault=true) AND labels:*") == ["a", "b"]
    assert names("metadata.operationType=DELETE_VERSION") == ["c"]
    assert names("name>a") == ["b", "c"]
    assert names("") == ["a", "b", "c"]
    for bad in ("colour=red", "state", "state=READY)", "(state=READY", "state ~ x", "=x"):
        with pytest.raises(InvalidArgument):
            listing.compile_filter(bad, fields)


def test_paging_tokens() -> None:
    items = [{"name": f"n{i:02d}"} for i in range(45)]
    page, token = listing.paginate(items, None, None, None)
    assert len(page) == 20 and token
    page2, token2 = listing.paginate(items, None, token, None)
    assert page2[0]["name"] == "n20" and token2
    last, end = listing.paginate(items, 500, token2, None)  # capped at 100
    assert [i["name"] for i in last] == [f"n{i}" for i in range(40, 45)] and end is None
    with pytest.raises(InvalidArgument):
        listing.paginate(items, 5, token, "state=READY")
    with pytest.raises(InvalidArgument):
        listing.paginate(items, -1, None, None)


def test_malformed_requests_get_clear_errors(make_app: Any) -> None:
    client = make_app()
    client.post(M, json={"name": "m"})
    cases = [
        (client.post(M, data=b"{bad", content_type="application/json"), "Invalid JSON payload received."),
        (client.post(M, json=[1]), "Invalid JSON payload received. The model must be a JSON object."),
        (client.post(M, data=b""), "Invalid JSON payload received. The request body is empty."),
        (client.post(M, data=b'{"name": "' + b"x" * 2_000_000 + b'"}'),
         "Request payload size exceeds the limit: 1572864 bytes."),
        (client.post(M, json={"name": 5}), "Invalid value at 'model.name' (TYPE_STRING), 5"),
        (client.post(M, json={"name": "a", "onlinePredictionLogging": "yes"}),
         "Invalid value at 'model.onlinePredictionLogging' (TYPE_BOOL), \"yes\""),
        (client.post(M, json={"name": "a", "labels": {"k": 1}}),
         "Field: model.labels Error: labels must map strings to strings."),
        (client.post(f"{M}/m/versions", json={"name": "v", "deploymentUri": "/x", "packageUris": "a"}),
         "Invalid value at 'version.packageUris' (array), \"a\""),
        (client.post(f"{M}/m/versions",
                     json={"name": "v", "deploymentUri": "/x", "container": {"image": "i"}}),
         "Field: version.container Error: Custom containers are not supported"),
        (client.get(f"{M}?pageSize=abc"), "Invalid value at 'pageSize' (TYPE_INT32), \"abc\""),
        (client.get(f"{M}?pageSize=-1"), "Field: page_size Error: pageSize must not be negative"),
        (client.get("/v1/projects/p/operations?returnPartialSuccess=true"),
         "returnPartialSuccess is not supported"),
    ]
    for resp, message in cases:
        assert resp.status_code == 400, resp.json
        assert resp.json["error"]["message"].startswith(message), resp.json
    assert client.put(f"{M}/m", json={}).status_code == 405
    assert client.get(f"{M}/m?fields=name,etag").json.keys() == {"name", "etag"}


def test_own_task_left_unfinished_is_run_again_when_its_lease_lapses(make_app: Any,
                                                                     tmp_path: Path) -> None:
    client = make_app()  # e.g. the store failed while this process was finishing the operation
    name = _orphan(client, tmp_path, client.emu.tasks.owner, time.time() - 1)
    client.emu.tasks.tick()
    assert wait_operation(client, client.get(f"/v1/{name}").json)["response"]["state"] == "READY"
    assert tasks.pending(client.emu.store) == []


# --- issue 17: deep filters and page tokens, ids ending in a newline ----------------------------

def test_deeply_nested_filters_and_page_tokens_are_invalid_arguments() -> None:
    import base64
    import json

    import pytest

    from controlplane import listing
    from core.errors import InvalidArgument

    fields = ("name", "labels")
    for spec in ("-" * 990 + "name=x", "(" * 300 + "name=x" + ")" * 300, "NOT " * 200 + "name=x"):
        with pytest.raises(InvalidArgument, match="levels deep"):
            listing.compile_filter(spec, fields)
    assert listing.compile_filter("(" * 10 + "name=x" + ")" * 10, fields)({"name": "x"})
    # Many NOTs side by side are not deep.
    assert listing.compile_filter(" AND ".join(["NOT name=y"] * 100), fields)({"name": "x"})
    deep = base64.urlsafe_b64encode(json.dumps([[]]).replace("[]", "[" * 100_000 + "]" * 100_000)
                                    .encode()).decode()
    with pytest.raises(InvalidArgument, match="Invalid page token"):
        listing.paginate([], None, deep, None)


def test_ids_ending_in_a_newline_are_refused() -> None:
    import pytest

    from core.errors import InvalidArgument
    from registry import names

    for bad in ("nl\n", "m\n", "a\r\n"):
        with pytest.raises(InvalidArgument):
            names.check_id(bad, "model.name", "Model")
    assert names.check_id("ok_1", "model.name", "Model") == "ok_1"
