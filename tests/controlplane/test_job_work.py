"""A server without Apache Beam (it is optional, requirements-beam.txt) still takes jobs and
fails each with an errorMessage that says what to install, serving everything else."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from tests.kit import batchkit, modelkit


def test_a_job_without_beam_fails_saying_so(make_app: Any, tmp_path: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "apache_beam" else real(name, *a))
    modelkit.sklearn_model(tmp_path / "sk")
    boot = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}}})
    client = make_app(boot, batch_any_framework=True, default_project="p")
    body = batchkit.prediction_job("no_beam", [str(tmp_path / "x.json")], str(tmp_path / "out"),
                                   modelName="projects/p/models/m")
    assert client.post("/v1/projects/p/jobs", json=body).status_code == 200
    assert client.emu.tasks.wait_idle(30)
    job = client.get("/v1/projects/p/jobs/no_beam").get_json()
    assert job["state"] == "FAILED"
    assert job["errorMessage"] == ("Batch prediction needs Apache Beam, which is not installed on "
                                   "this server: pip install -r requirements-beam.txt.")
    predicted = client.post("/v1/projects/p/models/m:predict", json={"instances": [[1, 2, 3, 4]]})
    assert predicted.status_code == 200
