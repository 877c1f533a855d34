"""docs/console.md's examples run as written: the Python "try it" shows, against a live server
with the model it names, and the shell line that turns the console off; the README links the
page and shows the overview's screenshot."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
import requests

from tests.conftest import ROOT, start_server, stop_server
from tests.console.consolekit import PROJECT, iris_bootstrap

pytestmark = pytest.mark.slow
DOC = ROOT / "docs" / "console.md"
DOC_URL = "http://127.0.0.1:8080"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(), re.MULTILINE | re.DOTALL)


def test_the_page_has_exactly_the_examples_tested_here():
    assert len(blocks("python")) == 1 and len(blocks("shell")) == 1
    assert not re.findall(r"^```(?!python|shell|$)\w+", DOC.read_text(), re.MULTILINE)


def test_the_python_example_predicts(tmp_path):
    server = start_server(tmp_path / "state", iris_bootstrap(tmp_path),
                          env={"MLEMU_PROJECT": PROJECT})
    try:
        code = blocks("python")[0].replace(DOC_URL, server.url)
        ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "{'predictions': [1, 0]}"
    finally:
        stop_server(server.proc)


def test_the_shell_example_turns_the_console_off(tmp_path):
    words = shlex.split(blocks("shell")[0].strip())
    env = dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))
    assert env == {"MLEMU_CONSOLE": "false"}
    assert words[len(env):] == ["./mlemu", "serve"]
    server = start_server(tmp_path / "state", env=env)  # `serve`, as ./mlemu runs it
    try:
        off = requests.get(f"{server.url}/console/", timeout=30)
        assert off.status_code == 404 and off.json() == {
            "error": "The requested URL /console/ was not found on this server."}
        assert requests.get(f"{server.url}/healthz", timeout=30).status_code == 200
    finally:
        stop_server(server.proc)


def test_the_readme_links_the_page_and_shows_the_overview():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/console.md)" in readme and "(docs/img/console-overview.png)" in readme
    assert (ROOT / "docs" / "img" / "console-overview.png").stat().st_size < 200_000
    assert "(img/console-overview.png)" in DOC.read_text()
