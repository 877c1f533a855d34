"""IAM on batch prediction jobs, in process (Flask test client, static tokens): jobs.create needs
`ml.jobs.create` on the project and predict permission on the model the job runs
(`ml.models.predict` for modelName, `ml.versions.predict` for versionName); a job's own policy
(jobs.setIamPolicy) grants access to that job only; testIamPermissions answers the subset held.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings
from tests.kit import batchkit, iamkit, modelkit

J = "/v1/projects/p/jobs"
TOKENS = {"admin": "serviceAccount:admin@p.iam.gserviceaccount.com", "dev": "user:dev@example.com",
          "jobber": "user:jobber@example.com", "user": "user:user@example.com",
          "holder": "user:holder@example.com", "outsider": "user:out@example.com"}
ROLES = {"admin": "roles/ml.admin", "dev": "roles/ml.developer", "jobber": "roles/ml.jobOwner",
         "user": "roles/ml.modelUser"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from app import create_app

    root = tmp_path_factory.mktemp("jobs-iam")
    modelkit.sklearn_model(root / "sk")
    boot = modelkit.bootstrap_file(root / "boot.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": str(root / "sk")}}}})
    iam = iamkit.write_config(root / "iam.yaml", {
        "staticTokens": TOKENS,
        "projects": {"p": {"bindings": [{"role": role, "members": [TOKENS[who]]}
                                        for who, role in ROLES.items()]}}})
    settings = Settings(state_dir=root / "state", config_file=boot, iam_config=iam,
                        iam_mode="enforce", default_project="p", batch_any_framework=True,
                        data_roots=(str(root),))
    test_client = create_app(settings, warm=False).test_client()
    test_client.root = root  # type: ignore[attr-defined]
    yield test_client
    assert test_client.application.extensions["mlemu"].tasks.wait_idle(batchkit.SETTLE_S)


def _job(root: Path, job_id: str, **model: str) -> dict[str, Any]:
    return batchkit.prediction_job(job_id, [str(root / "none-*.json")], str(root / job_id),
                                   maxWorkerCount=1, **model)


def call(client: Any, method: str, path: str, who: str | None, **kwargs: Any) -> Any:
    return client.open(path, method=method, headers=iamkit.bearer(who) if who else {}, **kwargs)


def test_create_needs_jobs_create_and_predict_on_the_model(client: Any) -> None:
    root = client.root
    by_model = {"modelName": "projects/p/models/m"}
    by_version = {"versionName": "projects/p/models/m/versions/v1"}
    cases = [
        ("user", by_model, 403, "ml.jobs.create", "projects/p"),
        ("jobber", by_model, 403, "ml.models.predict", "projects/p/models/m"),
        ("jobber", by_version, 403, "ml.versions.predict", "projects/p/models/m/versions/v1"),
        ("outsider", by_model, 403, "ml.jobs.create", "projects/p"),
        (None, by_model, 401, None, None),
    ]
    for who, model, status, permission, resource in cases:
        resp = call(client, "POST", J, who, json=_job(root, "denied", **model))
        assert resp.status_code == status, (who, resp.get_json())
        if permission:
            assert resp.get_json()["error"]["message"] == (
                f"Permission '{permission}' denied on resource '{resource}' (or it may not exist).")
    assert call(client, "GET", f"{J}/denied", "admin").status_code == 404  # nothing was made
    resp = call(client, "POST", J, "dev", json=_job(root, "by_dev", **by_version))
    assert resp.status_code == 200, resp.get_json()


def test_a_jobs_own_policy(client: Any) -> None:
    resp = call(client, "POST", J, "admin", json=_job(client.root, "shared",
                                                       modelName="projects/p/models/m"))
    assert resp.status_code == 200, resp.get_json()
    name = f"{J}/shared"
    assert call(client, "GET", name, "holder").status_code == 403
    policy = call(client, "POST", f"{name}:setIamPolicy", "admin", json={"policy": {"bindings": [
        {"role": "roles/ml.jobOwner", "members": [TOKENS["holder"]]}]}})
    assert policy.status_code == 200, policy.get_json()
    assert call(client, "GET", f"{name}:getIamPolicy", "holder").get_json()["bindings"] == [
        {"role": "roles/ml.jobOwner", "members": [TOKENS["holder"]]}]
    assert call(client, "GET", name, "holder").get_json()["jobId"] == "shared"
    assert call(client, "GET", J, "holder").status_code == 403  # the project's jobs: not theirs
    assert call(client, "GET", name, "outsider").status_code == 403
    asked = {"permissions": ["ml.jobs.get", "ml.jobs.cancel", "ml.models.get"]}
    held = call(client, "POST", f"{name}:testIamPermissions", "holder", json=asked).get_json()
    assert held == {"permissions": ["ml.jobs.get", "ml.jobs.cancel"]}
    assert call(client, "POST", f"{name}:testIamPermissions", "outsider", json=asked).get_json() == {}
    missing = call(client, "GET", f"{J}/ghost:getIamPolicy", "admin")
    assert missing.status_code == 404
    # A job that finds no input fails with the reason, never a traceback.
    client.application.extensions["mlemu"].tasks.wait_idle(batchkit.SETTLE_S)
    job = call(client, "GET", name, "admin").get_json()
    assert job["state"] == "FAILED" and "Traceback" not in job["errorMessage"], job
    assert "none-*.json" in job["errorMessage"], job
