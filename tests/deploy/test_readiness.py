"""Readiness holds until the bootstrap models are loaded (/readyz, and Vertex AI's health route),
while liveness (/healthz) answers from the start: what the startup probe in deploy/service.yaml
and Vertex AI's health checks rely on."""

from __future__ import annotations

import time
from pathlib import Path

from app import create_app
from core.settings import Settings, VertexSettings
from tests.kit import modelkit

# from_path blocks until MODEL_DIR/release exists: a model that takes as long as the test wants.
SLOW_LOADING = '''
import os
import time


class SlowLoading:
    @classmethod
    def from_path(cls, model_dir):
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(model_dir, "release")):
            if time.monotonic() > deadline:
                raise RuntimeError("never released")
            time.sleep(0.02)
        return cls()

    def predict(self, instances, **kwargs):
        return [len(row) for row in instances]
'''


def test_ready_only_once_bootstrap_models_are_loaded(tmp_path: Path) -> None:
    model_dir = modelkit.custom_model_dir(tmp_path / "slow")
    package = modelkit.custom_package(tmp_path / "pkg", module="slow_loading",
                                      source=SLOW_LOADING, kind="dir")
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {"slow": {"versions": {"v1": {
        "deploymentUri": str(model_dir), "predictionClass": "slow_loading.SlowLoading",
        "packageUris": [str(package)]}}}}, project="mlemu")
    vertex = VertexSettings(health_route="/health", predict_route="/predict",
                            storage_uri=str(model_dir), prediction_class="slow_loading.SlowLoading",
                            package_uris=(str(package),))
    settings = Settings(state_dir=tmp_path / "state", config_file=config, vertex=vertex)
    client = create_app(settings, warm=True).test_client()
    try:
        assert client.get("/healthz").status_code == 200
        for _ in range(3):  # the warm-up thread is blocked in from_path: not ready, repeatedly
            assert client.get("/readyz").get_json() == {"status": "loading"}
            assert client.get("/health").status_code == 503
            time.sleep(0.05)
    finally:
        (model_dir / "release").touch()
    deadline = time.monotonic() + 30
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "never became ready"
        time.sleep(0.02)
    assert client.get("/health").status_code == 200
    assert client.post("/predict", json={"instances": [[1, 2, 3]]}).get_json()["predictions"] == [3]


def test_ready_after_the_first_versions_while_the_others_load_in_the_background(
        tmp_path: Path) -> None:
    fast = modelkit.sklearn_model(tmp_path / "fast", kind="logreg", seed=0)
    slow_dir = modelkit.custom_model_dir(tmp_path / "slow")
    package = modelkit.custom_package(tmp_path / "pkg", module="slow_loading",
                                      source=SLOW_LOADING, kind="dir")
    late = modelkit.sklearn_model(tmp_path / "late", kind="logreg", seed=1)
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {"m": {"versions": {
        "fast": {"deploymentUri": str(tmp_path / "fast"), "framework": "SCIKIT_LEARN"},
        "slow": {"deploymentUri": str(slow_dir), "predictionClass": "slow_loading.SlowLoading",
                 "packageUris": [str(package)]},
        "late": {"deploymentUri": str(tmp_path / "late"), "framework": "SCIKIT_LEARN"}}}},
        project="mlemu")
    settings = Settings(state_dir=tmp_path / "state", config_file=config, ready_versions=1)
    client = create_app(settings, warm=True).test_client()
    rows = [[0.5, -1.0, 2.0, 0.1]]
    try:
        deadline = time.monotonic() + 60
        while client.get("/readyz").status_code != 200:  # `slow` is still blocked in from_path
            assert time.monotonic() < deadline, "never became ready"
            time.sleep(0.02)
        assert client.get("/v2/health/ready").status_code == 200
        # `late` waits behind `slow` in the background warm-up; its request loads it now.
        r = client.post("/v1/projects/mlemu/models/m/versions/late:predict",
                        json={"instances": rows})
        assert r.status_code == 200 and r.get_json()["predictions"] == late.predict(rows).tolist()
        r = client.post("/v1/projects/mlemu/models/m/versions/fast:predict",
                        json={"instances": rows})
        assert r.get_json()["predictions"] == fast.predict(rows).tolist()
    finally:
        (slow_dir / "release").touch()
    r = client.post("/v1/projects/mlemu/models/m/versions/slow:predict", json={"instances": rows})
    assert r.status_code == 200 and r.get_json()["predictions"] == [4]
