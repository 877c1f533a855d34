"""docs/console.md's examples: its `python` block runs against the demo server with every other
page's (tests/docs); the `sh` line that turns the console off, which tests/docs does not run (it
starts a server), is run here; the README links the page and shows the overview's screenshot."""

from __future__ import annotations

import re
import shlex

import pytest
import requests

from tests.conftest import ROOT, start_server, stop_server

pytestmark = pytest.mark.slow
DOC = ROOT / "docs" / "console.md"


def blocks(info: str) -> list[str]:
    return re.findall(rf"^```{re.escape(info)}\n(.*?)^```", DOC.read_text(),
                      re.MULTILINE | re.DOTALL)


def test_the_shell_example_turns_the_console_off(tmp_path):
    [block] = blocks("sh no-run: starts a server (tests/console/test_console_docs.py starts one "
                     "with this setting)")
    words = shlex.split(block.strip())
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
