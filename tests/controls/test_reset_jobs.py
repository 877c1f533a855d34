"""A reset stops a running batch prediction job: the job is gone and its pipeline's whole
process group ends (live server, the slow custom predictor running under Beam)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import start_server, stop_server
from tests.kit import batchkit, modelkit
from tests.kit.mlclient import ml_client

pytestmark = pytest.mark.slow
P = "projects/p"


def test_a_reset_cancels_a_running_job_and_its_pipeline(tmp_path: Path) -> None:
    (tmp_path / "slow-model").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "slow_predictor.py").write_text(batchkit.slow_predictor(0.05))
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "slow": {"versions": {"v1": {"deploymentUri": str(tmp_path / "slow-model"),
                                     "predictionClass": "slow_predictor.SlowPredictor",
                                     "packageUris": [str(tmp_path / "pkg")]}}}}, project="p")
    (tmp_path / "rows.json").write_text("".join(
        json.dumps([float(i), 1.0]) + "\n" for i in range(400)))
    state = tmp_path / "state"
    server = start_server(state, config=config, env={"MLEMU_BATCH_ANY_FRAMEWORK": "true",
                                                     "MLEMU_PROJECT": "p"})
    try:
        ml = ml_client(server.url)
        ml.projects().jobs().create(parent=P, body=batchkit.prediction_job(
            "long", [str(tmp_path / "rows.json")], str(tmp_path / "out"),
            modelName=f"{P}/models/slow", batchSize=1, maxWorkerCount=1)).execute()
        batchkit.wait_job(ml, f"{P}/jobs/long", ("RUNNING",),
                          check=lambda j: int(j.get("predictionOutput", {}).get(
                              "predictionCount", "0")) > 0)
        [pid] = batchkit.pipeline_pids(state)
        group = os.getpgid(pid)
        assert requests.post(server.url + "/_mlemu/reset", json={}, timeout=30).json() == {}
        assert ml.projects().jobs().list(parent=P).execute() == {}
        deadline = time.monotonic() + 60
        while batchkit.group_members(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert batchkit.group_members(group) == []
        # The bootstrap model still serves.
        answer = ml.projects().predict(name=f"{P}/models/slow",
                                       body={"instances": [[1.0, 2.0]]}).execute()
        assert answer["predictions"] == [3.0]
    finally:
        stop_server(server.proc)
