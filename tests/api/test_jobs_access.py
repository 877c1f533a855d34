"""What a batch prediction job may read and run, in IAM mode `enforce` (in process, real
pipeline): a wildcard in `inputPaths` that matches a symlink out of the data roots fails the job
before a byte is read, and a job's `uri` inside a registered version's files needs that
version's predict permission, as `versionName` would, in any project."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from core.settings import Settings
from tests.kit import batchkit, iamkit, modelkit

J = "/v1/projects/p/jobs"
TOKENS = {"admin": "user:admin@example.com", "jobber": "user:jobber@example.com",
          "runner": "user:runner@example.com"}
SECRET = "root:x:0:0:root:/root:/bin/bash"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from app import create_app

    root = tmp_path_factory.mktemp("jobs-access")
    conf = root / "conf"
    conf.mkdir()
    for name in ("mine", "theirs", "elsewhere"):
        modelkit.sklearn_model(conf / name)
    boot = conf / "boot.yaml"
    boot.write_text(yaml.safe_dump({"projects": {
        "p": {"models": {"mine": {"versions": {"v1": {"deploymentUri": "mine"}}},
                         "theirs": {"versions": {"v1": {"deploymentUri": "theirs"}}}}},
        "q": {"models": {"other": {"versions": {"v1": {"deploymentUri": "elsewhere"}}}}}}}))
    iam = iamkit.write_config(root / "iam.yaml", {
        "staticTokens": {token: member for token, member in TOKENS.items()},
        "projects": {
            "p": {"bindings": [{"role": "roles/ml.admin", "members": [TOKENS["admin"]]},
                               {"role": "roles/ml.jobOwner",
                                "members": [TOKENS["jobber"], TOKENS["runner"]]},
                               {"role": "roles/ml.viewer", "members": [TOKENS["jobber"]]},
                               {"role": "roles/ml.modelUser", "members": [TOKENS["runner"]]}]},
            "q": {"bindings": [{"role": "roles/ml.admin", "members": [TOKENS["admin"]]}]}}})
    data = root / "data"
    data.mkdir()
    settings = Settings(state_dir=root / "state", config_file=boot, iam_config=iam,
                        iam_mode="enforce", default_project="p", batch_any_framework=True,
                        data_roots=(str(data),))
    client = create_app(settings, warm=False).test_client()
    yield {"client": client, "root": root, "conf": conf, "data": data}
    assert client.application.extensions["mlemu"].tasks.wait_idle(batchkit.SETTLE_S)


def post_job(world: dict[str, Any], who: str, job_id: str, inputs: list[str], **model: str) -> Any:
    job = batchkit.prediction_job(job_id, inputs, str(world["data"] / job_id), maxWorkerCount=1,
                                  **model)
    return world["client"].post(J, headers=iamkit.bearer(who), json=job)


def finished(world: dict[str, Any], job_id: str) -> dict[str, Any]:
    client = world["client"]
    assert client.application.extensions["mlemu"].tasks.wait_idle(batchkit.SETTLE_S)
    return dict(client.get(f"{J}/{job_id}", headers=iamkit.bearer("admin")).get_json())


def test_a_wildcard_matching_a_symlink_out_of_the_roots_reads_nothing(world: dict[str, Any]) -> None:
    secret = world["root"] / "passwd"  # outside the data root
    secret.write_text(f"{SECRET}\n")
    data = world["data"]
    (data / "link_passwd").symlink_to(secret)
    (data / "ok.json").write_text("[1, 2, 3, 4]\n")
    model = str(world["conf"] / "mine")
    for job_id, pattern in (("by_file", str(data / "link_pass*")),
                            ("mixed", str(data / "*"))):
        answer = post_job(world, "admin", job_id, [pattern], uri=model)
        assert answer.status_code == 200, answer.get_json()
        job = finished(world, job_id)
        assert job["state"] == "FAILED", job
        assert job["errorMessage"] == (
            f"Batch prediction failed: Input path {pattern} matches a file outside the "
            "directories this server keeps job data in (MLEMU_DATA_ROOTS).")
        out = data / job_id
        written = "".join(p.read_text() for p in out.rglob("*") if p.is_file()) \
            if out.exists() else ""
        assert SECRET not in written and SECRET not in str(job)
    # Inside the roots, a symlink to a file that is also inside them is followed as before.
    (data / "alias.json").symlink_to(data / "ok.json")
    answer = post_job(world, "admin", "inside", [str(data / "alias*")], uri=model)
    assert answer.status_code == 200, answer.get_json()
    job = finished(world, "inside")
    assert job["state"] == "SUCCEEDED" and job["predictionOutput"]["predictionCount"] == "1", job


@pytest.mark.parametrize("n, uri", list(enumerate(["theirs", "theirs/", "theirs/../theirs",
                                                    "theirs/model.joblib", "elsewhere"])))
def test_a_uri_inside_a_versions_files_needs_its_predict_permission(world: dict[str, Any],
                                                                   n: int, uri: str) -> None:
    """jobOwner + viewer (who sees every deploymentUri) may not run `theirs` by its files, nor
    another project's model; jobOwner + modelUser may run `theirs` either way."""
    path = str(world["conf"] / uri)
    inputs = [str(world["data"] / "none-*.json")]
    job_id = f"by_uri_{n}"
    by_name = post_job(world, "jobber", job_id, inputs, versionName="projects/p/models/theirs/"
                       "versions/v1")
    assert by_name.status_code == 403
    answer = post_job(world, "jobber", job_id, inputs, uri=path)
    assert answer.status_code == 403, answer.get_json()
    error = answer.get_json()["error"]
    assert error["status"] == "PERMISSION_DENIED"
    assert "theirs" not in error["message"] and "other" not in error["message"]
    assert world["client"].get(f"{J}/{job_id}", headers=iamkit.bearer("admin")).status_code == 404
    if uri != "elsewhere":  # a caller who may predict with the version may run its files
        allowed = post_job(world, "runner", job_id, inputs, uri=path)
        assert allowed.status_code == 200, allowed.get_json()


def test_a_uri_no_version_serves_needs_only_the_job_permission(world: dict[str, Any]) -> None:
    fresh = world["conf"] / "unregistered"
    modelkit.sklearn_model(fresh)
    answer = post_job(world, "jobber", "fresh", [str(world["data"] / "none-*.json")],
                      uri=str(fresh))
    assert answer.status_code == 200, answer.get_json()
    assert os.path.isdir(fresh)


@pytest.mark.parametrize("field, value", [
    ("maxWorkerCount", 2**63), ("maxWorkerCount", str(2**64)), ("batchSize", "9" * 30),
    ("maxWorkerCount", True), ("batchSize", 1.5), ("maxWorkerCount", 1e300)])
def test_int64_fields_hold_int64s(world: dict[str, Any], field: str, value: Any) -> None:
    job = batchkit.prediction_job("big", [str(world["data"] / "none-*.json")],
                                  str(world["data"] / "big"), uri=str(world["conf"] / "mine"),
                                  **{field: value})
    answer = world["client"].post(J, headers=iamkit.bearer("admin"), json=job)
    assert answer.status_code == 400, answer.get_json()
    assert answer.get_json()["error"]["message"].startswith("Invalid value at")


@pytest.mark.parametrize("where", ["input", "output", "uri"])
@pytest.mark.parametrize("scheme", ["s3", "hdfs", "http", "S3"])
def test_only_local_paths_and_cloud_storage(world: dict[str, Any], where: str, scheme: str) -> None:
    """Other schemes are refused when the job is created, not failed at run time in the words of
    whichever library tried them."""
    remote = f"{scheme}://bucket/x"
    inputs = [remote] if where == "input" else [str(world["data"] / "none-*.json")]
    output = remote if where == "output" else str(world["data"] / "s")
    model = remote if where == "uri" else str(world["conf"] / "mine")
    job = batchkit.prediction_job("schemes", inputs, output, uri=model)
    answer = world["client"].post(J, headers=iamkit.bearer("admin"), json=job)
    assert answer.status_code == 400, answer.get_json()
    field = {"input": "input_paths", "output": "output_path", "uri": "uri"}[where]
    assert answer.get_json()["error"]["message"] == (
        f"Field: job.prediction_input.{field} Error: '{remote}' is not a local path or a gs:// "
        "URI.")
