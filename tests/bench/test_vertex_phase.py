"""The vertex phase's set-up against a real server (gunicorn, two workers): the model uploaded
and deployed through the REST API answers on its endpoint exactly what the same model answers
as an ml v1 version, which is what the phase then loads on both routes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench import measure, vertex
from tests.kit import modelkit


def test_deployed_endpoint_answers_like_the_ml_v1_version(
        tmp_path: Path, live_server: Callable[..., Any]) -> None:
    model = modelkit.sklearn_model(tmp_path / "m", "logreg", seed=3)
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"m": {"versions": {"v1": {
        "deploymentUri": str(tmp_path / "m"), "framework": "SCIKIT_LEARN"}}}}, project="bench")
    server = live_server(config=config, workers=2)
    port = urlsplit(server.url).port
    endpoint_url = vertex.deploy(port, "bench", tmp_path / "m")
    assert "/v1/projects/bench/locations/us-central1/endpoints/" in endpoint_url
    rows = modelkit.training_data()[0][:8].tolist()
    want = model.predict(rows).tolist()
    body = json.dumps({"instances": rows}).encode()
    status, v1 = measure.post(vertex.ml_v1_url(port, "bench", "m"), body)
    assert status == 200 and measure.same(v1["predictions"], want)
    for _ in range(4):  # either worker: the endpoint is in the shared store
        status, answer = measure.post(endpoint_url, body)
        assert status == 200, answer
        assert measure.same(answer["predictions"], want)
        assert answer["deployedModelId"] and answer["model"].startswith(
            "projects/bench/locations/us-central1/models/")
