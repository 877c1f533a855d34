"""Vertex AI custom-container contract (protocols/vertex.py): AIP_* routes in process with the
Flask test client, and a live `app.py serve` started the way Vertex AI starts the container."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from core.settings import Settings, VertexSettings
from tests.conftest import ROOT, free_port, stop_server
from tests.kit import modelkit

HEALTH = "/v1/endpoints/123/deployedModels/456"
PREDICT = "/v1/endpoints/123/deployedModels/456:predict"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("vertex-models")
    estimator = modelkit.sklearn_model(root / "sklearn", kind="logreg")
    return {"root": root, "sklearn": root / "sklearn", "estimator": estimator,
            "custom": modelkit.custom_model_dir(root / "custom", factor=3.0),
            "package": modelkit.custom_package(root / "pkg", kind="sdist")}


def vertex(storage_uri: str, **extra: Any) -> VertexSettings:
    return VertexSettings(health_route=HEALTH, predict_route=PREDICT, storage_uri=storage_uri,
                          deployed_model_id="456", **extra)


def google_error(resp: Any, status: int, code: str) -> str:
    assert resp.status_code == status, resp.get_data(as_text=True)
    error = resp.get_json()["error"]
    assert (error["code"], error["status"]) == (status, code)
    return str(error["message"])


def test_settings_read_the_aip_variables() -> None:
    env = {"AIP_HTTP_PORT": "7080", "PORT": "9090", "AIP_HEALTH_ROUTE": HEALTH,
           "AIP_PREDICT_ROUTE": PREDICT, "AIP_STORAGE_URI": "gs://b/model", "AIP_MODE": "PREDICTION",
           "AIP_DEPLOYED_MODEL_ID": "456"}
    settings = Settings.from_env(env)
    assert settings.port == 7080  # AIP_HTTP_PORT wins over PORT ...
    assert Settings.from_env({**env, "MLEMU_PORT": "6000"}).port == 6000  # ... MLEMU_PORT over both
    assert settings.vertex == VertexSettings(HEALTH, PREDICT, "gs://b/model", "456",
                                             passthrough={"AIP_MODE": "PREDICTION"})
    assert settings.grpc_port == 0  # Vertex AI routes one port
    assert Settings.from_env({**env, "MLEMU_GRPC_PORT": "8081"}).grpc_port == 8081
    assert Settings.from_env(settings.to_env()).vertex == settings.vertex
    # Without all three of health route, predict route and storage URI: no Vertex AI mode.
    assert Settings.from_env({k: v for k, v in env.items() if k != "AIP_STORAGE_URI"}).vertex is None


def test_health_and_predict_in_process(make_app: Any, models: dict[str, Any]) -> None:
    client = make_app(vertex=vertex(f"file://{models['sklearn']}"))
    health = client.get(HEALTH)
    assert (health.status_code, health.get_json()) == (200, {})
    rows = [[0.5, -1.0, 2.0, 0.1], [-2.0, 0.3, -0.2, 1.0]]
    resp = client.post(PREDICT, json={"instances": rows, "parameters": {}})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    expected = models["estimator"].predict(np.array(rows)).tolist()
    assert resp.get_json() == {"predictions": expected, "deployedModelId": "456"}
    # The same model is version v1 of model `vertex` for the other protocols.
    ml = client.post("/v1/projects/mlemu/models/vertex:predict", json={"instances": rows})
    assert ml.get_json() == {"predictions": expected}


def test_parameters_become_custom_predictor_kwargs(make_app: Any, models: dict[str, Any]) -> None:
    client = make_app(vertex=vertex(str(models["custom"]),
                                    prediction_class="scale_predictor.ScalePredictor",
                                    package_uris=(str(models["package"]),)))
    plain = client.post(PREDICT, json={"instances": [[1, 2]]})
    assert plain.get_json()["predictions"] == [9.0]
    resp = client.post(PREDICT, json={"instances": [[1, 2], [0, 1]],
                                      "parameters": {"threshold": 5, "extra": True}})
    assert resp.get_json()["predictions"] == [
        {"score": 9.0, "above": True, "kwargs": ["extra"]},
        {"score": 3.0, "above": False, "kwargs": ["extra"]}]


@pytest.mark.parametrize(("body", "fragment"), [
    ({"parameters": {}}, "'instances' must be a non-empty list"),
    ({"instances": []}, "'instances' must be a non-empty list"),
    ({"instances": [[1, 2, 3, 4]], "parameters": [1]}, "'parameters' must be an object"),
    ({"instances": [[1, 2, 3, 4]], "signature": "x"}, 'Unknown name "signature"'),
    ({"instances": [[1, 2, 3, 4]], "parameters": {"top_k": 2}}, 'Unknown name "top_k"'),
    ([1, 2], "Expected an object"),
])
def test_bad_requests_get_google_errors(make_app: Any, models: dict[str, Any], body: Any,
                                        fragment: str) -> None:
    client = make_app(vertex=vertex(str(models["sklearn"])))
    message = google_error(client.post(PREDICT, json=body), 400, "INVALID_ARGUMENT")
    assert fragment in message
    google_error(client.post(PREDICT, data=b"{not json"), 400, "INVALID_ARGUMENT")
    assert client.get(PREDICT).status_code == 405


def test_unloadable_model_fails_health_with_the_reason(make_app: Any, tmp_path: Path) -> None:
    client = make_app(vertex=vertex(str(tmp_path / "missing")))
    message = google_error(client.get(HEALTH), 503, "UNAVAILABLE")
    assert "cannot be served" in message and "missing" in message
    google_error(client.post(PREDICT, json={"instances": [[1]]}), 400, "FAILED_PRECONDITION")


@pytest.mark.slow
def test_live_server_started_like_vertex_ai(models: dict[str, Any], tmp_path: Path) -> None:
    """`python app.py serve` with only Vertex AI's variables: port, routes and model from AIP_*."""
    port = free_port()
    env = {**os.environ, "AIP_HTTP_PORT": str(port), "AIP_HEALTH_ROUTE": HEALTH,
           "AIP_PREDICT_ROUTE": PREDICT, "AIP_STORAGE_URI": f"file://{models['sklearn']}",
           "AIP_DEPLOYED_MODEL_ID": "456", "AIP_MODE": "PREDICTION", "PORT": str(free_port()),
           "MLEMU_STATE_DIR": str(tmp_path / "state"), "MLEMU_WORKERS": "1"}
    env.pop("MLEMU_GRPC_PORT", None)
    env.pop("MLEMU_PORT", None)
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "serve"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                health = requests.get(url + HEALTH, timeout=5)
                if health.status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert health.json() == {}
        rows = [[1.0, 2.0, 0.0, -1.0]]
        resp = requests.post(url + PREDICT, json={"instances": rows, "parameters": {}}, timeout=10)
        assert resp.status_code == 200, resp.text
        assert resp.json() == {"predictions": models["estimator"].predict(np.array(rows)).tolist(),
                               "deployedModelId": "456"}
        assert "gRPC" not in log.read_text()  # one port only under Vertex AI
    finally:
        stop_server(proc)
