"""pytest-mlemu: the example project (tests/plugin_example, public API only) passes against a
server the plugin starts from this checkout, and the package installs as a pytest11 plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
PLUGIN = ROOT / "pytest_mlemu"
EXAMPLE = ROOT / "tests" / "plugin_example"


def test_the_example_project_passes_with_the_plugin() -> None:
    env = {**os.environ, "MLEMU_CHECKOUT": str(ROOT),
           "PYTHONPATH": os.pathsep.join([str(PLUGIN / "src"), str(EXAMPLE)])}
    env.pop("MLEMU_URL", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_mlemu.plugin", "-c",
         str(EXAMPLE / "pytest.ini"), "--rootdir", str(EXAMPLE), "-q", str(EXAMPLE)],
        cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "6 passed" in run.stdout


def test_the_package_builds_with_its_pytest11_entry_point(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: building writes build/ and egg-info beside the code
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(tmp_path / "dist"), str(source)], check=True,
                   capture_output=True, timeout=300)
    [wheel] = (tmp_path / "dist").glob("pytest_mlemu-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [entry_points] = [n for n in names if n.endswith("entry_points.txt")]
        text = archive.read(entry_points).decode()
    assert "[pytest11]" in text and "mlemu = pytest_mlemu.plugin" in text
    assert {"pytest_mlemu/plugin.py", "pytest_mlemu/client.py",
            "pytest_mlemu/server.py"} <= set(names)
