"""docs/controls.md as written: every shell line runs, in order, against a live server serving
project `demo`'s `iris` (as `make serve` does); the Python blocks are the example project's
files, which tests/controls/test_plugin.py runs; the IAM block grants `mlemu.admin`."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from core.payloads import Caller
from core.settings import Settings
from tests.conftest import ROOT, LiveServer, start_server, stop_server
from tests.kit import modelkit

pytestmark = pytest.mark.slow
DOC = (ROOT / "docs" / "controls.md").read_text()
EXAMPLE = ROOT / "tests" / "plugin_example"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}(?: [^\n]*)?\n(.*?)```", DOC, re.DOTALL)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("docs")
    modelkit.sklearn_model(root / "iris")
    config = modelkit.bootstrap_file(root / "boot.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(root / "iris")}}}}, project="demo")
    live = start_server(root / "state", config, env={"MLEMU_PROJECT": "demo"})
    yield live
    stop_server(live.proc)


def run_block(block: str, url: str) -> list[str]:
    """Each line's output (every line must exit 0)."""
    outputs = []
    for line in block.strip().splitlines():
        command = line.replace("http://127.0.0.1:8080", url).replace(
            "./mlemu admin ", f"./mlemu admin --url {url} ")
        run = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, env={**os.environ, "MLEMU_GRPC_PORT": "0"})
        assert run.returncode == 0, f"{line}\n{run.stdout}\n{run.stderr}"
        outputs.append(run.stdout)
    return outputs


def test_every_shell_example_runs_as_written(server: LiveServer) -> None:
    reset, snapshots, faults, timing, journal, cli = blocks("sh")
    assert run_block(reset, server.url) == ["{}", "{}"]
    out = run_block(snapshots, server.url)
    assert out[1] == "{}" and "Restored" in out[3]
    out = run_block(faults, server.url)
    assert '"id":"1"' in out[0].replace(" ", "")
    assert '"status": "RESOURCE_EXHAUSTED"' in out[1] and "QuotaFailure" in out[1]
    assert '"predictions"' in out[2]
    assert '"hits":1' in out[3].replace(" ", "") and out[4] == "{}"
    out = run_block(timing, server.url)
    assert '"polls":3' in out[2].replace(" ", "") and "DELETE_VERSION" in out[2]
    out = run_block(journal, server.url)
    assert [r.count('"method":"predict"') for r in out[:1]] == [2]
    assert '"recordBodies":true' in out[1]
    out = run_block(cli, server.url)
    assert '"status": "UNAVAILABLE"' in out[0] and '"times": 2' in out[1]
    assert '"seconds": 5' in out[3] and "Reset the emulator" in out[-1]


def test_the_python_examples_are_the_example_projects_files() -> None:
    files = [(EXAMPLE / name).read_text() for name in ("conftest.py", "scoring.py",
                                                        "test_scoring.py")]
    assert blocks("python") == files


def test_the_iam_example_grants_the_admin_permission(tmp_path: Path) -> None:
    import auth

    [block] = blocks("yaml")
    path = tmp_path / "iam.yaml"
    path.write_text(block)
    assert yaml.safe_load(block)["projects"]["demo"]
    settings = Settings(state_dir=tmp_path, iam_mode="enforce", iam_config=path,
                        default_project="demo")

    class View:
        policy = auth.load_config(settings)
        store = None

    view = View()
    view.settings = settings  # type: ignore[attr-defined]
    ci = Caller("serviceAccount:ci@demo.iam.gserviceaccount.com", True)
    assert "mlemu.admin" in auth.granted(view, ci, "projects/demo")  # type: ignore[arg-type]
    assert "mlemu.admin" not in auth.granted(view, Caller("user:x@example.com", True),  # type: ignore[arg-type]
                                             "projects/demo")
