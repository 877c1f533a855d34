"""The overview's Vertex AI section with the Vertex AI API in the build: uploaded models, and
endpoints with their deployed models and traffic split, listed with every name escaped.

This needs the Vertex AI API (`/v1/projects/{p}/locations/{l}/models|endpoints`), which lands
separately; without it the section says the API is not available, which
tests/console/test_console_pages.py checks."""

from __future__ import annotations

import json
from typing import Any

from tests.console.consolekit import PROJECT
from tests.modelkit import sklearn_model

LOC = f"/v1/projects/{PROJECT}/locations/us-central1"
IMAGE = "europe-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-3:latest"


def call(client: Any, method: str, path: str, body: Any = None) -> Any:
    answer = client.open(path, method=method, data=json.dumps(body) if body is not None else None,
                         content_type="application/json")
    assert answer.status_code == 200, answer.data
    return answer.json


def test_overview_lists_vertex_models_and_endpoints_with_their_traffic(make_app, tmp_path):
    sklearn_model(tmp_path / "models" / "a")
    client = make_app(default_project=PROJECT, model_roots=(str(tmp_path / "models"),))
    uploaded = call(client, "POST", f"{LOC}/models:upload", {"model": {
        "displayName": "<script>alert(1)</script>", "artifactUri": str(tmp_path / "models" / "a"),
        "containerSpec": {"imageUri": IMAGE}}})
    model = uploaded["response"]["model"]
    endpoint = call(client, "POST", f"{LOC}/endpoints", {"displayName": "iris-endpoint"})
    endpoint_name = endpoint["response"]["name"]
    call(client, "POST", f"/v1/{endpoint_name}:deployModel", {"deployedModel": {
        "model": model, "displayName": "blue", "dedicatedResources": {"minReplicaCount": 1}}})
    page = client.get("/console/").data.decode()
    assert "not available in this build" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert "iris-endpoint" in page and "blue" in page and "traffic 100%" in page
