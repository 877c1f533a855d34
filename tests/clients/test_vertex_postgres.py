"""Vertex AI's state in PostgreSQL (a real server started by the tests): two instances with
separate state directories share one database; a model uploaded and deployed through one is
predicted through the other, and an undeploy through the other stops it serving in the first
(whose process had it loaded), as with ml v1 resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from tests.conftest import start_server, stop_server
from tests.kit import modelkit

pytestmark = pytest.mark.slow
LOC = "projects/shared/locations/europe-west4"
IMAGE = "europe-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"
ROWS = [[0.5, -1.0, 2.0, 0.1], [-2.0, 0.3, -0.7, 1.5]]


def test_two_instances_share_vertex_state(postgres: Any, tmp_path: Path) -> None:
    model = modelkit.sklearn_model(tmp_path / "models" / "m", kind="logreg")
    env = {"MLEMU_DATABASE_URL": postgres.new_database(),
           "MLEMU_MODEL_ROOTS": str(tmp_path / "models")}
    a = start_server(tmp_path / "a", env=env)
    b = start_server(tmp_path / "b", env=env)
    try:
        upload = requests.post(f"{a.url}/v1/{LOC}/models:upload", timeout=30, json={"model": {
            "displayName": "m", "artifactUri": str(tmp_path / "models" / "m"),
            "containerSpec": {"imageUri": IMAGE}}}).json()
        name = upload["response"]["model"]
        ep = requests.post(f"{b.url}/v1/{LOC}/endpoints", json={"displayName": "e"},
                           timeout=30).json()["response"]["name"]
        deployed = requests.post(f"{b.url}/v1/{ep}:deployModel", timeout=60,
                                 json={"deployedModel": {"model": name}}).json()
        deployed_id = deployed["response"]["deployedModel"]["id"]
        expect = model.predict(np.asarray(ROWS)).tolist()
        for server in (a, b):
            answer = requests.post(f"{server.url}/v1/{ep}:predict", json={"instances": ROWS},
                                   timeout=30).json()
            assert answer["predictions"] == expect and answer["deployedModelId"] == deployed_id
        assert requests.get(f"{a.url}/v1/{upload['name']}", timeout=30).json()["done"] is True
        requests.post(f"{b.url}/v1/{ep}:undeployModel", json={"deployedModelId": deployed_id},
                      timeout=30).raise_for_status()
        gone = requests.post(f"{a.url}/v1/{ep}:predict", json={"instances": ROWS}, timeout=30)
        assert gone.status_code == 400
        assert gone.json()["error"]["status"] == "FAILED_PRECONDITION"
    finally:
        stop_server(a.proc)
        stop_server(b.proc)
