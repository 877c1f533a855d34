"""The real thing: `python app.py serve` (gunicorn, two workers) and `python app.py predict`."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from tests.conftest import ROOT
from tests.kit import modelkit


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("live")
    model = modelkit.sklearn_model(root / "sk", "forest")
    config = modelkit.bootstrap_file(root / "mlemu.yaml", {
        "forest": {"versions": {"v1": {"deploymentUri": "sk"}}}})
    return root, model, config


def test_two_workers_serve_one_registry_and_survive_oversized_bodies(setup, live_server):
    root, model, config = setup
    server = live_server(config, workers=2)
    url = server.url + "/v1/projects/p/models/forest:predict"
    rows = modelkit.training_data(n=8, seed=3)[0]
    expected = model.predict(rows).tolist()

    big = b'{"instances": [' + b"[1.0, 2.0, 0.5, -1.0]," * 90_000 + b"[0.0, 0.0, 0.0, 0.0]]}"
    resp = requests.post(url, data=big, headers={"Content-Type": "application/json"}, timeout=30)
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == "Request payload size exceeds the limit: 1572864 bytes."
    assert requests.post(url, json={"instances": rows.tolist()}, timeout=30).json() == {
        "predictions": expected}

    def one(i):
        # A fresh connection each time, so gunicorn spreads requests over both workers.
        with requests.Session() as s:
            pid = s.get(server.url + "/healthz", timeout=30).json()["pid"]
            got = s.post(url, json={"instances": [rows[i % 8].tolist()]}, timeout=30)
            return pid, got.status_code, got.json()["predictions"], expected[i % 8]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(80)))
    assert all(status == 200 and got == [want] for _, status, got, want in results)
    assert len({pid for pid, *_ in results}) == 2, "both workers should have answered"


def test_serving_scikit_learn_never_imports_tensorflow(setup, tmp_path):
    root, _, config = setup
    code = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
from app import create_app
from core.settings import Settings
app = create_app(Settings(state_dir=Path({str(tmp_path)!r}), config_file=Path({str(config)!r})), warm=False)
resp = app.test_client().post("/v1/projects/p/models/forest:predict",
                              json={{"instances": [[0.1, 0.2, 0.3, 0.4]]}})
assert resp.status_code == 200, resp.data
# Nor, with IAM off, google-auth's JWT verification and the cryptography behind it.
print(sorted(m for m in ("tensorflow", "keras", "xgboost", "torch", "google.auth.jwt",
                         "cryptography") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_cli_local_predict(setup, tmp_path):
    root, model, _ = setup
    rows = modelkit.training_data(n=3, seed=5)[0]
    instances = tmp_path / "instances.json"
    instances.write_text("\n".join(json.dumps(r) for r in rows.tolist()) + "\n")
    out = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "predict", "--model-dir", str(root / "sk"),
         "--json-instances", str(instances), "--framework", "SCIKIT_LEARN"],
        capture_output=True, text=True, check=True)
    assert [json.loads(line) for line in out.stdout.splitlines()] == model.predict(rows).tolist()
    bad = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "predict", "--model-dir", str(tmp_path),
         "--json-instances", str(instances)], capture_output=True, text=True)
    assert bad.returncode != 0 and "Could not find a model file" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert np.isfinite(rows).all()
