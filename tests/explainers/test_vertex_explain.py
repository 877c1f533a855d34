"""Vertex AI explain with integrated gradients on a TensorFlow model: an explanationSpec given
inline at upload (camelCase metadata, no explanation_metadata.json needed) gives exactly
w * (x - baseline) for a linear model, through the REST surface in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.explainers.test_explain_client import TF_BASELINE, W, tf1_linear

pytestmark = pytest.mark.slow
LOC = "/v1/projects/p/locations/us-central1"


def test_integrated_gradients_on_tensorflow(make_app: Any, tmp_path: Path) -> None:
    tf1_linear(tmp_path / "models" / "tf1")
    (tmp_path / "models" / "tf1" / "explanation_metadata.json").unlink()  # the spec carries it
    client = make_app(model_roots=(str(tmp_path / "models"),))
    spec = {"parameters": {"integratedGradientsAttribution": {"stepCount": 10}},
            "metadata": {"inputs": {"features": {"inputTensorName": "x:0",
                                                 "inputBaselines": [TF_BASELINE]}},
                         "outputs": {"score": {"outputTensorName": "y:0"}}}}
    upload = client.post(f"{LOC}/models:upload", json={"model": {
        "displayName": "linear", "artifactUri": str(tmp_path / "models" / "tf1"),
        "containerSpec": {"imageUri": "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"},
        "explanationSpec": spec}})
    assert upload.status_code == 200, upload.get_json()
    endpoint = client.post(f"{LOC}/endpoints", json={"displayName": "e"}).get_json()
    name = endpoint["response"]["name"]
    deployed = client.post(f"/v1/{name}:deployModel", json={"deployedModel": {
        "model": upload.get_json()["response"]["model"]}})
    assert deployed.status_code == 200 and "error" not in deployed.get_json(), deployed.get_json()
    rows = [[1.0, 2.0, 3.0], [-0.5, 0.25, 4.0]]
    answer = client.post(f"/v1/{name}:explain", json={"instances": rows})
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    for row, explanation in zip(rows, body["explanations"], strict=True):
        (attribution,) = explanation["attributions"]
        expected = W * (np.array(row) - TF_BASELINE)
        assert attribution["featureAttributions"]["features"] == [
            pytest.approx(float(v), rel=1e-5) for v in expected]
        assert attribution["approximationError"] == pytest.approx(0.0, abs=1e-4)
        assert attribution["outputName"] == "score"
    assert len(body["predictions"]) == len(rows)
