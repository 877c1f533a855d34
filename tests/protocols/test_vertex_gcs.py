"""Vertex AI's AIP_STORAGE_URI is a gs:// URI in production: the model is read from a real Cloud
Storage emulator (gcp-storage-emulator, started by the tests) through the same path as any
gs:// deploymentUri."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app import create_app
from core.settings import Settings, VertexSettings
from tests.kit import modelkit

pytestmark = pytest.mark.slow


def test_vertex_model_from_gs_uri(gcs_emulator: Any, tmp_path: Path) -> None:
    estimator = modelkit.sklearn_model(tmp_path / "sk", kind="logreg")
    bucket = gcs_emulator.client().create_bucket("vertex-artifacts")
    gcs_emulator.upload_dir(bucket, tmp_path / "sk", "deployed/model")
    vertex = VertexSettings(health_route="/health", predict_route="/predict",
                            storage_uri="gs://vertex-artifacts/deployed/model", deployed_model_id="7")
    settings = Settings(state_dir=tmp_path / "state", vertex=vertex,
                        storage_emulator_host=gcs_emulator.host)
    client = create_app(settings, warm=True).test_client()
    deadline = time.monotonic() + 60
    while client.get("/health").status_code != 200:
        assert time.monotonic() < deadline, client.get("/health").get_data(as_text=True)
        time.sleep(0.05)
    rows = [[0.5, -1.0, 2.0, 0.1]]
    resp = client.post("/predict", json={"instances": rows})
    assert resp.get_json() == {"predictions": estimator.predict(np.array(rows)).tolist(),
                               "deployedModelId": "7"}
    missing = VertexSettings("/health", "/predict", "gs://vertex-artifacts/nothing-here")
    other = create_app(Settings(state_dir=tmp_path / "state2", vertex=missing,
                                storage_emulator_host=gcs_emulator.host), warm=True).test_client()
    deadline = time.monotonic() + 60
    while not other.application.extensions["mlemu"].is_ready():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    health = other.get("/health")
    assert health.status_code == 503 and "nothing-here" in health.get_json()["error"]["message"]
