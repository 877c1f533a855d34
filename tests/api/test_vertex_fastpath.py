"""Vertex AI's endpoints.predict fast path (protocols/vertex_fastpath.py) answers exactly as the
Flask view: every request is sent through the app as gunicorn runs it and straight to the layer
below the fast path; status, content type and body bytes must agree, and the fast path must have
taken the requests it claims."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from werkzeug.test import Client, EnvironBuilder

from tests.kit import modelkit

LOC = "/v1/projects/p/locations/us-central1"
ROW = [1.0, 2.0, 0.5, -1.0]
SDK_QUERY = "?%24alt=json%3Benum-encoding%3Dint"


def _fast_path(app: Any) -> Any:
    from protocols.vertex_fastpath import VertexPredictFastPath

    layer = app.wsgi_app
    while not isinstance(layer, VertexPredictFastPath):
        layer = layer.app
    return layer


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("vertex-fast")
    model = modelkit.sklearn_model(root / "m", "logreg", seed=0)
    settings = Settings(state_dir=root / "state", model_roots=(str(root),),
                        max_request_bytes=4096)
    app = create_app(settings, warm=False)
    client = app.test_client()
    upload = client.post(f"{LOC}/models:upload", json={"model": {
        "displayName": "m", "artifactUri": str(root / "m"), "containerSpec": {
            "imageUri": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"}}})
    name = upload.get_json()["response"]["model"]
    endpoint = client.post(f"{LOC}/endpoints", json={"displayName": "e"}).get_json()
    ep = endpoint["response"]["name"]
    empty = client.post(f"{LOC}/endpoints", json={"displayName": "none"}).get_json()
    deploy = client.post(f"/v1/{ep}:deployModel", json={"deployedModel": {"model": name}})
    assert deploy.status_code == 200, deploy.get_json()
    return {"app": app, "ep": ep, "empty": empty["response"]["name"], "model": model}


def both(app: Any, path: str, data: str) -> tuple[Any, Any, bool]:
    kwargs = {"method": "POST", "data": data, "content_type": "application/json"}
    fast = Client(app).open(path, **kwargs)
    below = Client(_fast_path(app).app).open(path, **kwargs)
    taken = _fast_path(app).route(EnvironBuilder(path, **kwargs).get_environ()) is not None
    return fast, below, taken


@pytest.mark.parametrize(("target", "query", "body"), [
    ("ep", "", {"instances": [ROW, ROW]}),
    ("ep", SDK_QUERY, {"instances": [ROW]}),
    ("ep", "?alt=json", {"instances": [ROW], "parameters": {}}),
    ("ep", "", {"instances": [ROW], "rows": 1}),
    ("ep", "", {"instances": []}),
    ("ep", "", "{not json"),
    ("ep", "", {"instances": [[1.0, 2.0]]}),  # wrong feature count
    ("ep", "", {"instances": [ROW] * 200}),  # over max_request_bytes
    ("empty", "", {"instances": [ROW]}),  # nothing deployed
    ("missing", "", {"instances": [ROW]}),
])
def test_fast_path_answers_like_flask(world: dict[str, Any], target: str, query: str,
                                      body: Any) -> None:
    endpoint = world.get(target, f"{LOC[4:]}/endpoints/404")
    data = body if isinstance(body, str) else json.dumps(body)
    fast, below, taken = both(world["app"], f"/v1/{endpoint}:predict{query}", data)
    assert taken
    assert (fast.status_code, fast.content_type, fast.get_data()) == (
        below.status_code, below.content_type, below.get_data())


def test_the_answer_and_what_the_fast_path_leaves_to_flask(world: dict[str, Any]) -> None:
    fast, _, taken = both(world["app"], f"/v1/{world['ep']}:predict",
                          json.dumps({"instances": [ROW]}))
    assert taken and fast.status_code == 200
    assert fast.get_json()["predictions"] == world["model"].predict(np.asarray([ROW])).tolist()
    for path in (f"/v1/{world['ep']}:predict?fields=predictions", f"/v1/{world['ep']}:explain",
                 f"/v1/{world['ep']}:rawPredict"):
        assert not both(world["app"], path, "{}")[2]
