"""The documented TF Serving session against `make serve`'s demo, on a live gunicorn server, and
the promise that serving scikit-learn over every route never imports TensorFlow."""

from __future__ import annotations

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

    status = requests.get(f"{url}/v1/models/half_plus_three", timeout=30)
    assert status.json() == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    # curl -d '{"instances": [1.0, 2.0, 5.0]}' -X POST .../v1/models/half_plus_three:predict
    predict = requests.post(f"{url}/v1/models/half_plus_three:predict",
                            data='{"instances": [1.0, 2.0, 5.0]}', timeout=30)
    assert (predict.status_code, predict.json()) == (200, {"predictions": [3.5, 4.0, 5.5]})
    regress = requests.post(f"{url}/v1/models/half_plus_three:regress", timeout=30, data=(
        '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 2.0}]}'))
    assert (regress.status_code, regress.json()) == (200, {"results": [3.5, 4.0]})
    missing = requests.post(f"{url}/v1/models/half:predict", data='{"instances": [1.0, 2.0, 5.0]}',
                            timeout=30)
    assert (missing.status_code, missing.json()) == (
        404, {"error": "Servable not found for request: Latest(half)"})
    # The label from demo/bootstrap.yaml, and the same model through AI Platform.
    labelled = requests.post(f"{url}/v1/models/half_plus_three/labels/stable:predict",
                             data='{"inputs": {"x": [1.0, 2.0]}}', timeout=30)
    assert labelled.json() == {"outputs": [3.5, 4.0]}
    ai = requests.post(f"{url}/v1/projects/demo/models/half_plus_three:predict",
                       json={"instances": [1.0, 2.0, 5.0]}, timeout=30)
    assert ai.content.rstrip() == predict.content.rstrip()  # ml v1 ends with a newline
    iris = requests.post(f"{url}/v1/models/iris/versions/2:predict",
                         data='{"instances": [[5.1, 3.5, 1.4, 0.2]]}', timeout=30)
    assert iris.json() == {"predictions": [0]}


NO_TENSORFLOW = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from app import create_app
    from settings import Settings
    from tests import modelkit

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
