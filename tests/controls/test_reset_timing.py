"""Reset and timing rules through the admin surface, in process: the bootstrap models come back
as they were and stay loaded; everything else, rules and journal included, goes; operations
finish when their type's timing rule says."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kit import modelkit

ROWS = [[0.5, -1.0, 2.0, 0.1]]
BOOT = "/v1/projects/demo/models/iris"


@pytest.fixture
def world(tmp_path: Path, make_app: Callable[..., Any]) -> Any:
    modelkit.sklearn_model(tmp_path / "iris")
    modelkit.sklearn_model(tmp_path / "other", kind="linreg")
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "iris": {"description": "the demo", "versions": {"v1": {"deploymentUri":
                                                                 str(tmp_path / "iris")}}}},
        project="demo")
    # scikit-learn in batch (MLEMU_BATCH_ANY_FRAMEWORK): the job test needs a batch-able model
    client = make_app(config, batch_any_framework=True)
    client.root = tmp_path
    return client


def ok(answer: Any) -> Any:
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_json()


def wait_done(client: Any, op: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while not op.get("done"):
        assert time.monotonic() < deadline, op
        time.sleep(0.05)
        op = ok(client.get(f"/v1/{op['name']}"))
    return op


def create_version(client: Any, project: str, model: str, version: str) -> dict[str, Any]:
    client.post(f"/v1/projects/{project}/models", json={"name": model})
    return ok(client.post(f"/v1/projects/{project}/models/{model}/versions",
                          json={"name": version, "deploymentUri": str(client.root / "other")}))


def test_reset_restores_the_bootstrap_models_still_loaded(world: Any) -> None:
    emu = world.emu
    ok(world.post(f"{BOOT}:predict", json={"instances": ROWS}))
    loaded = emu.deployments.get(emu.store.get_version("projects/demo/models/iris/versions/v1"))
    wait_done(world, create_version(world, "demo", "extra", "v1"))
    wait_done(world, create_version(world, "elsewhere", "m", "v1"))
    wait_done(world, ok(world.patch(f"{BOOT}?updateMask=description",
                                    json={"description": "changed"})))
    ok(world.post(f"{BOOT}:setIamPolicy", json={"policy": {"bindings": [
        {"role": "roles/ml.viewer", "members": ["user:ann@example.com"]}]}}))
    ok(world.post("/_mlemu/faults", json={"match": {"model": "nothing"}, "delayMs": 1}))
    ok(world.put("/_mlemu/timing", json={"operationType": "DELETE_MODEL", "after": {"polls": 3}}))
    assert ok(world.get("/_mlemu/requests"))["requests"]

    assert ok(world.post("/_mlemu/reset", json={})) == {}

    assert [m["name"] for m in ok(world.get("/v1/projects/demo/models"))["models"]] == [
        "projects/demo/models/iris"]
    assert ok(world.get("/v1/projects/elsewhere/models")) == {}
    assert ok(world.get(BOOT))["description"] == "the demo"
    assert "bindings" not in ok(world.get(f"{BOOT}:getIamPolicy"))
    assert ok(world.get("/v1/projects/demo/operations")) == {}
    assert ok(world.get("/_mlemu/faults")) == {"faults": []}
    assert ok(world.get("/_mlemu/timing")) == {"timing": []}
    # Only the calls made since the reset are journaled.
    assert [r["method"] for r in ok(world.get("/_mlemu/requests"))["requests"]] == [
        "models.list", "models.list", "models.get", "models.getIamPolicy", "operations.list"]
    version = emu.store.get_version("projects/demo/models/iris/versions/v1")
    assert emu.deployments.get(version) is loaded  # not reloaded
    assert emu.deployments.incarnations() == {(version.name, version.uid)}
    assert ok(world.post(f"{BOOT}:predict", json={"instances": ROWS}))["predictions"]


def test_a_project_reset_leaves_other_projects_alone(world: Any) -> None:
    wait_done(world, create_version(world, "one", "m", "v1"))
    wait_done(world, create_version(world, "two", "m", "v1"))
    ok(world.post("/_mlemu/faults", json={"match": {"project": "one"}, "delayMs": 1}))
    ok(world.post("/_mlemu/faults", json={"match": {"project": "two"}, "delayMs": 1}))
    assert ok(world.post("/_mlemu/reset", json={"project": "one"})) == {}
    assert ok(world.get("/v1/projects/one/models")) == {}
    assert len(ok(world.get("/v1/projects/two/models"))["models"]) == 1
    assert [r["match"] for r in ok(world.get("/_mlemu/faults"))["faults"]] == [
        {"project": "two"}]
    assert ok(world.get(BOOT))["name"] == "projects/demo/models/iris"


@pytest.mark.parametrize("body", [{"project": "a/b"}, {"project": 3}, {"projects": "x"}, []])
def test_a_bad_reset_body_is_refused(world: Any, body: Any) -> None:
    answer = world.post("/_mlemu/reset", json=body)
    assert answer.status_code == 400
    assert answer.get_json()["error"]["status"] == "INVALID_ARGUMENT"


def test_an_operation_waits_for_its_polls(world: Any) -> None:
    ok(world.put("/_mlemu/timing", json={"operationType": "CREATE_VERSION",
                                          "after": {"polls": 3}}))
    op = create_version(world, "demo", "slow", "v1")
    for _ in range(2):  # the runner holds the work until the third operations.get
        op = ok(world.get(f"/v1/{op['name']}"))
        assert not op.get("done")
    assert ok(world.get("/v1/projects/demo/models/slow/versions/v1"))["state"] == "CREATING"
    op = wait_done(world, ok(world.get(f"/v1/{op['name']}")))
    assert "error" not in op
    assert ok(world.get("/v1/projects/demo/models/slow/versions/v1"))["state"] == "READY"


def test_an_operation_fails_as_its_rule_says(world: Any) -> None:
    ok(world.put("/_mlemu/timing", json={"operationType": "CREATE_VERSION",
                                          "fail": {"code": "RESOURCE_EXHAUSTED",
                                                   "message": "No capacity in the region."}}))
    op = wait_done(world, create_version(world, "demo", "failing", "v1"))
    assert op["error"]["code"] == 8
    assert "No capacity in the region." in op["error"]["message"]
    version = ok(world.get("/v1/projects/demo/models/failing/versions/v1"))
    assert version["state"] == "FAILED"
    assert version["errorMessage"] == "Create Version failed. No capacity in the region."
    ok(world.delete("/_mlemu/timing?operationType=CREATE_VERSION"))
    assert wait_done(world, create_version(world, "demo", "failing", "v2")).get("error") is None


def test_a_batch_prediction_job_fails_as_its_rule_says(world: Any) -> None:
    ok(world.put("/_mlemu/timing", json={"operationType": "BATCH_PREDICTION",
                                          "fail": {"code": 8, "message": "Out of CPU quota."}}))
    data = world.root / "inputs.json"
    data.write_text("[0.5, -1.0, 2.0, 0.1]\n")
    created = ok(world.post("/v1/projects/demo/jobs", json={
        "jobId": "held", "predictionInput": {
            "dataFormat": "JSON", "inputPaths": [str(data)], "outputPath": str(world.root / "out"),
            "region": "us-central1", "modelName": "projects/demo/models/iris"}}))
    assert created["state"] == "QUEUED"
    deadline = time.monotonic() + 60
    job = created
    while job["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
        job = ok(world.get("/v1/projects/demo/jobs/held"))
    assert (job["state"], job["errorMessage"]) == ("FAILED", "Out of CPU quota.")
    assert not (world.root / "out").exists()  # its pipeline never ran


def test_held_operations_leave_the_runner_free_for_others(world: Any) -> None:
    """Three version creations held back (more than the runner's threads) do not stop a model
    deletion; cancelling a held one ends it at once."""
    ok(world.put("/_mlemu/timing", json={"operationType": "CREATE_VERSION",
                                          "after": {"polls": 1000}}))
    held = [create_version(world, "demo", f"held{n}", "v1") for n in range(3)]
    ok(world.post("/v1/projects/demo/models", json={"name": "doomed"}))
    deleted = wait_done(world, ok(world.delete("/v1/projects/demo/models/doomed")))
    assert "error" not in deleted
    assert all(not ok(world.get(f"/v1/{op['name']}")).get("done") for op in held)
    cancelled = ok(world.post(f"/v1/{held[0]['name']}:cancel", json={}))
    assert cancelled == {}
    op = ok(world.get(f"/v1/{held[0]['name']}"))
    assert op["done"] and op["error"]["code"] == 1
    assert ok(world.get("/v1/projects/demo/models/held0/versions/v1"))["state"] == "FAILED"


def test_a_reset_before_the_bootstrap_models_loaded_changes_nothing(
        world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from admin import reset

    monkeypatch.setattr(reset, "WARM_WAIT_S", 0.0)
    world.emu.warmed.clear()  # as in a worker still loading its bootstrap models
    wait_done(world, create_version(world, "demo", "extra", "v1"))
    answer = world.post("/_mlemu/reset", json={})
    assert answer.status_code == 503
    assert answer.get_json()["error"]["status"] == "UNAVAILABLE"
    assert len(ok(world.get("/v1/projects/demo/models"))["models"]) == 2
