"""The overview's Vertex AI section with the Vertex AI API in the build: uploaded models, and
endpoints with their deployed models and traffic split, listed with every name escaped.

This needs the Vertex AI API (`/v1/projects/{p}/locations/{l}/models|endpoints`), which lands
separately; without it the section says the API is not available, which
tests/console/test_console_pages.py checks."""

from __future__ import annotations

import json
from typing import Any

from tests.console.consolekit import PROJECT
from tests.kit.modelkit import sklearn_model

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


def test_endpoint_page_tries_a_prediction_and_its_sdk_snippet_runs(tmp_path):
    """Live server: the endpoint's page lists its deployed model and traffic; try it answers as
    the endpoint does, and the Vertex AI SDK snippet it shows gives the same predictions."""
    import os
    import re
    import subprocess
    import sys

    import requests

    from tests.conftest import start_server, stop_server

    sklearn_model(tmp_path / "models" / "a")
    server = start_server(tmp_path / "state", env={
        "MLEMU_PROJECT": PROJECT, "MLEMU_MODEL_ROOTS": str(tmp_path / "models")})
    try:
        http = requests.Session()

        def rest(method: str, path: str, body: Any = None) -> Any:
            answer = http.request(method, server.url + path, json=body, timeout=60)
            assert answer.status_code == 200, answer.text
            return answer.json()

        uploaded = rest("POST", f"{LOC}/models:upload", {"model": {
            "displayName": "iris", "artifactUri": str(tmp_path / "models" / "a"),
            "containerSpec": {"imageUri": IMAGE}}})
        endpoint = rest("POST", f"{LOC}/endpoints", {"displayName": "iris-endpoint"})
        name = endpoint["response"]["name"]
        rest("POST", f"/v1/{name}:deployModel", {"deployedModel": {
            "model": uploaded["response"]["model"], "displayName": "blue",
            "dedicatedResources": {"minReplicaCount": 1}}})
        page_url = f"{server.url}/console/{name}"
        page = http.get(page_url, timeout=60)
        assert page.status_code == 200 and "blue" in page.text and "100%" in page.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        body = {"instances": [[1.0, 0.5, 0.0, 0.0], [-2.0, -1.0, 0.0, 0.0]]}
        tried = http.post(page_url + "/try", data={"csrf": csrf, "method": "predict",
                                                   "body": json.dumps(body)}, timeout=60)
        assert 'id="result-status">200<' in tried.text
        direct = rest("POST", f"/v1/{name}:predict", body)
        assert direct["predictions"] == [1, 0]
        import html

        snippet = html.unescape(re.search(r'<pre id="python">(.*?)</pre>', tried.text,
                                          re.DOTALL).group(1))
        assert "aiplatform.Endpoint(" in snippet
        ran = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                             timeout=300, check=False,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "[1.0, 0.0]"  # the SDK reads protobuf Values: floats
    finally:
        stop_server(server.proc)
