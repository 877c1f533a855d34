"""The documented TF Serving session against `make serve`'s demo, on a live gunicorn server, and
the promise that serving scikit-learn over every route never imports TensorFlow."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_documented_session_against_the_demo(tmp_path: Path, live_server: Any) -> None:
    # The demo exactly as `make serve` builds and serves it, in a scratch copy.
    demo = tmp_path / "demo"
    shutil.copytree(ROOT / "demo", demo, ignore=shutil.ignore_patterns("__pycache__"))
    # demo/bootstrap.yaml points at ../mlemu-state/demo-models, where make_models.py writes
    models = tmp_path / "mlemu-state" / "demo-models"
    subprocess.run([sys.executable, str(demo / "make_models.py"), str(models)],
                   check=True, capture_output=True, timeout=300)
    server = live_server(demo / "bootstrap.yaml", env={"MLEMU_PROJECT": "demo"})
    url = server.url

    # The seed's documented session (api_rest.md "Example", run with curl), byte for byte.
    assert curl(url, "GET", "/v1/models/half_plus_three") == (200, "OK", (
        b'{\n "model_version_status": [\n  {\n   "version": "123",\n   "state": "AVAILABLE",\n'
        b'   "status": {\n    "error_code": "OK",\n    "error_message": ""\n   }\n  }\n ]\n}\n'))
    # api_rest.md shows `[3.5, 4.0, 5.5]` closing on its line; the release's code
    # (json_tensor.cc MakeRowFormatJsonFromTensors: PrettyWriter, single-line items, then the
    # default format for EndArray) writes the newline and indent before `]`. The code is what answers.
    predict = curl(url, "POST", "/v1/models/half_plus_three:predict", '{"instances": [1.0,2.0,5.0]}')
    assert predict == (200, "OK", b'{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}')
    assert json.loads(predict[2]) == {"predictions": [3.5, 4.0, 5.5]}  # the document's values
    regress = curl(url, "POST", "/v1/models/half_plus_three:regress",
                   '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 2.0}]}')
    assert regress == (200, "OK", b'{\n    "results": [3.5, 4.0]\n}')
    # curl -i: "HTTP/1.1 404 Not Found", Content-Type: application/json. The document's body and
    # Content-Length (65) are a 2018 server's, which wrote `{ "error": "..." }` by hand; since 2020
    # MakeJsonFromStatus writes it with PrettyWriter: 63 bytes.
    connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=30)
    connection.request("POST", "/v1/models/half:predict", body='{"instances": [1.0,5.0]}',
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    missing = connection.getresponse()
    body = missing.read()
    assert (missing.version, missing.status, missing.reason) == (11, 404, "Not Found")
    assert missing.getheader("Content-Type") == "application/json"
    assert missing.getheader("Content-Length") == "63" == str(len(body))
    assert body == b'{\n    "error": "Servable not found for request: Latest(half)"\n}'
    connection.close()

    # The label from demo/bootstrap.yaml, and the same model through AI Platform.
    labelled = requests.post(f"{url}/v1/models/half_plus_three/labels/stable:predict",
                             data='{"inputs": {"x": [1.0, 2.0]}}', timeout=30)
    assert labelled.json() == {"outputs": [3.5, 4.0]}
    ai = requests.post(f"{url}/v1/projects/demo/models/half_plus_three:predict",
                       json={"instances": [1.0, 2.0, 5.0]}, timeout=30)
    assert ai.json() == {"predictions": [3.5, 4.0, 5.5]}
    iris = requests.post(f"{url}/v1/models/iris/versions/2:predict",
                         data='{"instances": [[5.1, 3.5, 1.4, 0.2]]}', timeout=30)
    assert iris.json() == {"predictions": [0]}


def curl(url: str, method: str, path: str, data: str | None = None) -> tuple[int, str, bytes]:
    """What `curl [-d DATA] -X METHOD URL` sends (a form content type) and gets back."""
    connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=30)
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if data is not None else {}
    connection.request(method, path, body=data, headers=headers)
    response = connection.getresponse()
    try:
        return response.status, response.reason, response.read()
    finally:
        connection.close()


NO_TENSORFLOW = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from app import create_app
    from core.settings import Settings
    from tests.kit import modelkit

    base = Path({base!r})
    modelkit.sklearn_model(base / "iris")
    config = modelkit.bootstrap_file(base / "b.yaml", {{
        "iris": {{"versions": {{"v1": {{"deploymentUri": str(base / "iris")}}}}}}}})
    client = create_app(Settings(state_dir=base / "state", config_file=config, default_project="p"),
                        warm=True).test_client()
    client.application.extensions["mlemu"].warmed.wait(60)
    rows = json.dumps({{"instances": [[1, 2, 3, 4]]}})
    answers = [
        client.post("/v1/projects/p/models/iris:predict", data=rows),
        client.post("/v1/models/iris:predict", data=rows),
        client.post("/v1/models/iris/versions/1:predict", data=json.dumps({{"inputs": [[1, 2, 3, 4]]}})),
        client.get("/v1/models/iris"),
        client.get("/v1/models/iris/metadata"),
        client.post("/v1/models/iris:classify", data=json.dumps({{"examples": [{{"x": 1.0}}]}})),
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 200, 400], answers
    assert "tensorflow" not in sys.modules, "serving scikit-learn imported TensorFlow"
    print("ok")
""")


def test_serving_scikit_learn_never_imports_tensorflow(tmp_path: Path) -> None:
    script = NO_TENSORFLOW.format(root=str(ROOT), base=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
