"""docs/vertex.md's SDK example, run as written (its URL pointed at a live server) with its model
directories made beside it and a real Cloud Storage emulator for the SDK's staging bucket."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import modelkit
from tests.conftest import ROOT, start_server, stop_server

pytestmark = pytest.mark.slow


def python_blocks() -> list[str]:
    text = (ROOT / "docs" / "vertex.md").read_text()
    return re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_the_pages_python_example_runs(gcs_emulator: Any, tmp_path: Path) -> None:
    blocks = python_blocks()
    assert len(blocks) == 1
    gcs_emulator.client().create_bucket("staging")
    modelkit.sklearn_model(tmp_path / "model_dir", kind="linreg", seed=0)
    modelkit.sklearn_model(tmp_path / "other_dir", kind="linreg", seed=1)
    env = {"STORAGE_EMULATOR_HOST": gcs_emulator.host}
    server = start_server(tmp_path / "state", env=env)
    try:
        code = blocks[0].replace("http://127.0.0.1:8080", server.url)
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300, env={**os.environ, **env})
    finally:
        stop_server(server.proc)
    assert run.returncode == 0, run.stderr[-3000:]
    # The SDK logs its progress on stdout too: find the example's own lines.
    lines = [line for line in run.stdout.splitlines()
             if line.startswith(("Prediction(", "{"))]
    assert lines[0].startswith("Prediction(predictions=[") and "deployed_model_id='" in lines[0]
    assert sorted(ast.literal_eval(lines[1]).values()) == [20, 80]
    assert lines[2].startswith("{'features': [")
