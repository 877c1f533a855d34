"""What AI Platform Prediction refused (issue 34, item 6): regions that are not the service's,
runtime versions it never listed, and batch prediction on a version whose machine type batch
prediction did not run (controlplane/catalog.py cites the guides)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.kit import batchkit, modelkit

P = "projects/p"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("catalog")
    modelkit.sklearn_model(root / "sk", features=3)
    (root / "data").mkdir()
    (root / "data" / "in.json").write_text("[1.0, 2.0, 3.0]\n")
    config = modelkit.bootstrap_file(root / "boot.yaml", {
        "sk": {"versions": {
            "legacy": {"deploymentUri": str(root / "sk"), "machineType": "mls1-c1-m2"},
            "n1": {"deploymentUri": str(root / "sk"), "machineType": "n1-standard-4"}}}})
    settings = Settings(state_dir=root / "state", config_file=config, default_project="p",
                        batch_any_framework=True, model_roots=(str(root),),
                        data_roots=(str(root / "data"),))
    app = create_app(settings, warm=False)
    app.config["root"] = root
    return app.test_client()


def post(client: Any, path: str, body: Any) -> tuple[int, Any]:
    response = client.post(f"/v1/{path}", data=json.dumps(body), content_type="application/json")
    return response.status_code, json.loads(response.data)


def job(client: Any, job_id: str, **more: Any) -> dict[str, Any]:
    root = client.application.config["root"]
    return batchkit.prediction_job(job_id, [str(root / "data" / "in.json")],
                                   str(root / "data" / f"out-{job_id}"), **more)


def test_a_region_the_service_does_not_have(client: Any) -> None:
    status, body = post(client, f"{P}/models", {"name": "mars", "regions": ["mars-central1"]})
    assert status == 400
    assert body["error"]["message"].startswith(
        "Field: model.regions Error: Region 'mars-central1' is not one of AI Platform "
        "Prediction's regions: ")
    assert post(client, f"{P}/models", {"name": "iowa", "regions": ["us-central1"]})[0] == 200
    spec = job(client, "mars_job", versionName=f"{P}/models/sk/versions/legacy")
    spec["predictionInput"]["region"] = "mars-central1"
    status, body = post(client, f"{P}/jobs", spec)
    assert status == 400
    assert body["error"]["message"].startswith(
        "Field: job.prediction_input.region Error: Region 'mars-central1' is not one of")


@pytest.mark.parametrize(("runtime", "status"), [("0.9", 400), ("2.12", 400), ("latest", 400),
                                                  ("2.11", 200), ("1.15", 200)])
def test_runtime_versions_the_service_listed(client: Any, runtime: str, status: int) -> None:
    root = client.application.config["root"]
    code, body = post(client, f"{P}/models/sk/versions", {
        "name": f"rt_{runtime.replace('.', '_')}", "deploymentUri": str(root / "sk"),
        "runtimeVersion": runtime})
    assert code == status, body
    if status == 400:
        assert body["error"]["message"].startswith(
            f"Field: version.runtime_version Error: Runtime version '{runtime}' is not supported")


def test_batch_prediction_needs_a_legacy_machine_type(client: Any) -> None:
    spec = job(client, "n1_job", versionName=f"{P}/models/sk/versions/n1")
    status, body = post(client, f"{P}/jobs", spec)
    assert status == 400
    assert "uses machine type n1-standard-4, which batch prediction does not support" in \
        body["error"]["message"]
    # A legacy version passes the check and meets the next one (an output path outside the
    # data roots), so no job starts here.
    spec = job(client, "legacy_job", versionName=f"{P}/models/sk/versions/legacy")
    spec["predictionInput"]["outputPath"] = "/elsewhere/out"
    status, body = post(client, f"{P}/jobs", spec)
    assert status in (400, 403), body
    assert "machine type" not in body["error"]["message"]
    assert "outputPath" in body["error"]["message"] or "output_path" in body["error"]["message"]
