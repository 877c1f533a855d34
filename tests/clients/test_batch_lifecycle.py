"""Batch prediction job life cycle against live servers (MLEMU_BATCH_ANY_FRAMEWORK on, so a
scikit-learn model and a slow custom predictor can run): a job on DirectRunner multi-processing
with 2 workers; cancel of a running job (CANCELLING -> CANCELLED, the pipeline's whole process
group gone); and a server killed mid-job whose job a restarted server takes over and finishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, start_server, stop_server
from tests.kit import batchkit, modelkit
from tests.kit.mlclient import ml_client

pytestmark = pytest.mark.slow
P = "projects/p"
ENV = {"MLEMU_BATCH_ANY_FRAMEWORK": "true", "MLEMU_PROJECT": "p"}


def _models(base: Path) -> Path:
    modelkit.sklearn_model(base / "sk", kind="logreg")
    (base / "slow-model").mkdir()
    (base / "pkg").mkdir()
    (base / "pkg" / "slow_predictor.py").write_text(batchkit.slow_predictor(0.05))
    return modelkit.bootstrap_file(base / "boot.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": str(base / "sk")}}},
        "slow": {"versions": {"v1": {"deploymentUri": str(base / "slow-model"),
                                     "predictionClass": "slow_predictor.SlowPredictor",
                                     "packageUris": [str(base / "pkg")]}}}}, project="p")


def _rows(path: Path, count: int) -> list[list[float]]:
    rows = [[float(i % 5), 0.1 * i, -1.0, 2.0] for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_two_workers_cancel_and_restart(tmp_path: Path) -> None:
    config = _models(tmp_path)
    state = tmp_path / "state"
    server = start_server(state, config=config, env=ENV)
    try:
        ml = ml_client(server.url)
        jobs = ml.projects().jobs()

        # DirectRunner in multi-processing mode, two workers: every instance predicted once.
        rows = _rows(tmp_path / "sk.json", 300)
        jobs.create(parent=P, body=batchkit.prediction_job(
            "two_workers", [str(tmp_path / "sk.json")], str(tmp_path / "two-out"),
            modelName=f"{P}/models/sk", batchSize=16, maxWorkerCount=2)).execute()
        job = batchkit.wait_job(ml, f"{P}/jobs/two_workers")
        assert job["state"] == "SUCCEEDED", job
        assert job["predictionOutput"]["predictionCount"] == "300"
        online = ml.projects().predict(name=f"{P}/models/sk", body={"instances": rows}).execute()
        got = sorted(batchkit.results(batchkit.local_outputs(tmp_path / "two-out")))
        assert got == sorted(online["predictions"])

        # The gcloud-style CLI: submit with --wait shows the progress and the final job.
        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, str(ROOT / "app.py"), "jobs", *args,
                                   "--url", server.url, "--project", "p"],
                                  capture_output=True, text=True, timeout=120)

        done = cli("submit", "prediction", "by_cli", "--model", "sk", "--data-format", "json",
                   "--input-paths", str(tmp_path / "sk.json"), "--output-path",
                   str(tmp_path / "cli-out"), "--max-worker-count", "1", "--wait")
        assert done.returncode == 0, done.stderr
        assert "Job [by_cli] submitted successfully." in done.stdout
        assert "state: SUCCEEDED" in done.stdout and "predictionCount: '300'" in done.stdout
        assert "300/300" in done.stdout + done.stderr  # the progress bar's last state
        listed = cli("list", "--filter", "state=SUCCEEDED")
        assert listed.returncode == 0 and "by_cli" in listed.stdout and "two_workers" in listed.stdout
        assert "jobId: by_cli" in cli("describe", "by_cli").stdout

        # Cancel: the job is RUNNING with predictions made, then CANCELLING, then CANCELLED,
        # and the pipeline's process group (runner, fork server and forked workers) is gone.
        _rows(tmp_path / "slow.json", 400)
        jobs.create(parent=P, body=batchkit.prediction_job(
            "to_cancel", [str(tmp_path / "slow.json")], str(tmp_path / "cancel-out"),
            modelName=f"{P}/models/slow", batchSize=1, maxWorkerCount=2)).execute()
        batchkit.wait_job(ml, f"{P}/jobs/to_cancel", ("RUNNING",),
                          check=lambda j: int(j.get("predictionOutput", {}).get(
                              "predictionCount", "0")) > 0)
        pids = batchkit.pipeline_pids(state)
        assert len(pids) == 1
        group = os.getpgid(pids[0])
        assert jobs.cancel(name=f"{P}/jobs/to_cancel").execute() == {}
        state_now = jobs.get(name=f"{P}/jobs/to_cancel").execute()["state"]
        assert state_now in ("CANCELLING", "CANCELLED")
        job = batchkit.wait_job(ml, f"{P}/jobs/to_cancel")
        assert job["state"] == "CANCELLED" and job["errorMessage"]
        assert batchkit.group_members(group) == []
        assert not (tmp_path / "cancel-out").exists() or not any(
            p.name.startswith("prediction.results") for p in (tmp_path / "cancel-out").iterdir())

        # Kill the server mid-job: its pipeline stops with it; a new server adopts the job and
        # runs it to the end.
        # Mid-job means after its first predictions: RUNNING is recorded just before the
        # pipeline's process starts. 200 rows at 50 ms leave ~10 s to kill it in.
        restart_rows = _rows(tmp_path / "restart.json", 200)
        jobs.create(parent=P, body=batchkit.prediction_job(
            "survivor", [str(tmp_path / "restart.json")], str(tmp_path / "restart-out"),
            modelName=f"{P}/models/slow", batchSize=1, maxWorkerCount=1)).execute()
        batchkit.wait_job(ml, f"{P}/jobs/survivor", ("RUNNING",),
                          check=lambda j: int(j.get("predictionOutput", {}).get(
                              "predictionCount", "0")) > 0)
        assert batchkit.pipeline_pids(state)
    finally:
        stop_server(server.proc, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while batchkit.pipeline_pids(state) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert batchkit.pipeline_pids(state) == []
    server = start_server(state, config=config, env=ENV, port=int(server.url.rsplit(":", 1)[1]))
    try:
        ml = ml_client(server.url)
        job = batchkit.wait_job(ml, f"{P}/jobs/survivor")
        assert job["state"] == "SUCCEEDED", job
        sums = sorted(batchkit.results(batchkit.local_outputs(tmp_path / "restart-out")))
        np.testing.assert_allclose(sums, sorted(sum(r) for r in restart_rows))
    finally:
        stop_server(server.proc)
