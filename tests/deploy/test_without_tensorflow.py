"""What the image built with WITH_TENSORFLOW=false does with a TENSORFLOW version: the version
fails with a clear errorMessage (and predicting says so) instead of a 500 on every request."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from app import create_app
from core.settings import Settings
from tests.kit import modelkit


def test_tensorflow_version_fails_clearly_without_tensorflow(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # `import tensorflow` raises ImportError
    model_dir = tmp_path / "tf"
    model_dir.mkdir()
    (model_dir / "saved_model.pb").write_bytes(b"")
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {"tf": {"versions": {"v1": {
        "deploymentUri": str(model_dir)}}}})
    client = create_app(Settings(state_dir=tmp_path / "state", config_file=config),
                        warm=True).test_client()
    deadline = time.monotonic() + 30
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    version = client.get("/v1/projects/p/models/tf/versions/v1").get_json()
    assert version["state"] == "FAILED"
    assert "TensorFlow is not installed" in version["errorMessage"]
    resp = client.post("/v1/projects/p/models/tf:predict", json={"instances": [1.0]})
    assert resp.status_code == 400 and "FAILED" in resp.get_data(as_text=True)
