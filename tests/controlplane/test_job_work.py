"""A server without Apache Beam (it is optional, requirements-beam.txt) still takes jobs and
fails each with an errorMessage that says what to install, serving everything else."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from tests.kit import batchkit, modelkit


def test_a_job_without_beam_fails_saying_so(make_app: Any, tmp_path: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "apache_beam" else real(name, *a))
    modelkit.sklearn_model(tmp_path / "sk")
    boot = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}}})
    client = make_app(boot, batch_any_framework=True, default_project="p")
    body = batchkit.prediction_job("no_beam", [str(tmp_path / "x.json")], str(tmp_path / "out"),
                                   modelName="projects/p/models/m")
    assert client.post("/v1/projects/p/jobs", json=body).status_code == 200
    assert client.emu.tasks.wait_idle(batchkit.SETTLE_S)
    job = client.get("/v1/projects/p/jobs/no_beam").get_json()
    assert job["state"] == "FAILED"
    assert job["errorMessage"] == ("Batch prediction needs Apache Beam, which is not installed on "
                                   "this server: pip install -r requirements-beam.txt.")
    predicted = client.post("/v1/projects/p/models/m:predict", json={"instances": [[1, 2, 3, 4]]})
    assert predicted.status_code == 200


def _slow_world(make_app: Any, tmp_path: Any) -> Any:
    (tmp_path / "slow-model").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "slow_predictor.py").write_text(batchkit.slow_predictor(0.05))
    boot = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "slow": {"versions": {"v1": {"deploymentUri": str(tmp_path / "slow-model"),
                                     "predictionClass": "slow_predictor.SlowPredictor",
                                     "packageUris": [str(tmp_path / "pkg")]}}}})
    (tmp_path / "in.json").write_text("[1, 2]\n" * 300)
    return make_app(boot, batch_any_framework=True, default_project="p")


def _staging(out: Any) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("beam-temp-")) \
        if out.exists() else []


def test_a_cancelled_job_leaves_no_staging_folders(make_app: Any, tmp_path: Any) -> None:
    """Beam stages shards in beam-temp-* folders of outputPath; a cancelled run's are removed."""
    import time

    client = _slow_world(make_app, tmp_path)
    out = tmp_path / "out"
    body = batchkit.prediction_job("stopped", [str(tmp_path / "in.json")], str(out),
                                   modelName="projects/p/models/slow", batchSize=1,
                                   maxWorkerCount=1)
    assert client.post("/v1/projects/p/jobs", json=body).status_code == 200
    deadline = time.monotonic() + 120
    while not _staging(out):  # the run has begun writing
        assert time.monotonic() < deadline, client.get("/v1/projects/p/jobs/stopped").get_json()
        time.sleep(0.1)
    assert client.post("/v1/projects/p/jobs/stopped:cancel").status_code == 200
    assert client.emu.tasks.wait_idle(batchkit.SETTLE_S)
    assert client.get("/v1/projects/p/jobs/stopped").get_json()["state"] == "CANCELLED"
    assert _staging(out) == []


def test_an_adopted_jobs_earlier_staging_folders_are_removed(make_app: Any, tmp_path: Any) -> None:
    """What a killed server's run left (its beam-temp-* folder and partial shard) is removed when
    the job runs again; anything else in outputPath stays."""
    client = _slow_world(make_app, tmp_path)
    out = tmp_path / "out"
    stale = out / "beam-temp-prediction.results-0123456789abcdef"
    stale.mkdir(parents=True)
    (stale / "partial-shard").write_text("[3]\n")
    (out / "beam-temp-note.txt").write_text("a file, not Beam's folder\n")
    (tmp_path / "in.json").write_text("[1, 2]\n" * 3)
    body = batchkit.prediction_job("again", [str(tmp_path / "in.json")], str(out),
                                   modelName="projects/p/models/slow", maxWorkerCount=1)
    assert client.post("/v1/projects/p/jobs", json=body).status_code == 200
    assert client.emu.tasks.wait_idle(batchkit.SETTLE_S)
    job = client.get("/v1/projects/p/jobs/again").get_json()
    assert job["state"] == "SUCCEEDED", job
    assert _staging(out) == ["beam-temp-note.txt"]


def test_long_records_and_long_messages_are_bounded(make_app: Any, tmp_path: Any) -> None:
    """A 30 MB line is one error, never read whole; a model error echoing a 3 MB value is kept
    to MAX_MESSAGE_CHARS in the errors file; the other lines are predicted."""
    import json

    from batch import records

    modelkit.sklearn_model(tmp_path / "sk")
    boot = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}}})
    client = make_app(boot, batch_any_framework=True, default_project="p")
    huge = b"[" + b"1.0, " * 6_000_000 + b"1.0]"  # 30 MB of numbers
    echoed = json.dumps(["x" * 3_000_000, 1.0, 2.0, 3.0]).encode()
    (tmp_path / "in.json").write_bytes(b"\n".join([b"[1, 2, 3, 4]", huge, echoed,
                                                   b"[4, 3, 2, 1]"]) + b"\n")
    out = tmp_path / "out"
    body = batchkit.prediction_job("long", [str(tmp_path / "in.json")], str(out),
                                   modelName="projects/p/models/m", maxWorkerCount=1)
    assert client.post("/v1/projects/p/jobs", json=body).status_code == 200
    assert client.emu.tasks.wait_idle(batchkit.SETTLE_S)
    job = client.get("/v1/projects/p/jobs/long").get_json()
    assert job["state"] == "SUCCEEDED", job
    assert job["predictionOutput"]["predictionCount"] == "2"
    assert job["predictionOutput"]["errorCount"] == "2"
    texts = batchkit.local_outputs(out)
    errors = batchkit.error_stats(texts)
    assert errors[f"The record is {len(huge)} bytes; batch prediction reads records of at most "
                  f"{records.MAX_RECORD_BYTES} bytes."] == 1
    assert all(len(message) < records.MAX_MESSAGE_CHARS + 100 for message in errors)
    assert sum(len(t) for name, t in texts.items() if "errors_stats" in name) < 5000


def test_a_job_starts_only_when_its_memory_is_free(make_app: Any, tmp_path: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """While less memory is free than the job needs it stays PREPARING and starts no process;
    it runs once the memory is there."""
    import threading

    from controlplane import job_work

    asked = []
    freed = threading.Event()

    def free_memory() -> int:
        asked.append(1)
        return 1 << 50 if freed.is_set() else 0

    monkeypatch.setattr(job_work, "free_memory", free_memory)
    modelkit.sklearn_model(tmp_path / "sk")
    boot = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}}})
    client = make_app(boot, batch_any_framework=True, default_project="p")
    (tmp_path / "in.json").write_text("[1, 2, 3, 4]\n")
    body = batchkit.prediction_job("waits", [str(tmp_path / "in.json")], str(tmp_path / "out"),
                                   modelName="projects/p/models/m", maxWorkerCount=1)
    assert client.post("/v1/projects/p/jobs", json=body).status_code == 200
    import time

    deadline = time.monotonic() + 60
    while len(asked) < 3:  # it has looked, and waited, more than once
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert client.get("/v1/projects/p/jobs/waits").get_json()["state"] == "PREPARING"
    assert not (client.emu.settings.jobs_path / "p" / "waits").exists()  # no pipeline started
    freed.set()
    assert client.emu.tasks.wait_idle(batchkit.SETTLE_S)
    job = client.get("/v1/projects/p/jobs/waits").get_json()
    assert job["state"] == "SUCCEEDED" and job["predictionOutput"]["predictionCount"] == "1", job
