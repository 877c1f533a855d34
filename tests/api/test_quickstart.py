"""The README's quick start: the demo models `make serve` bundles answer every README curl line."""

import json
import re
import shlex
import subprocess
import sys

import requests

from tests.conftest import ROOT


def readme_curl_commands():
    """Every `curl` command in the README (continuation lines joined), parsed like a shell."""
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("curl "):
            args = shlex.split(line.split(" # ")[0])
            method, body, url = "GET", None, None
            for i, arg in enumerate(args):
                if arg == "-X":
                    method = args[i + 1]
                elif arg in ("-d", "--data"):
                    body = args[i + 1]
                elif arg.startswith("http"):
                    url = arg
            commands.append((method, url, body))
    return commands


def test_readme_curl_examples_answer_with_predictions(live_server, tmp_path):
    subprocess.run([sys.executable, str(ROOT / "demo" / "make_models.py")], check=True)
    # as `make serve` runs it: the TF Serving routes serve the `demo` project
    server = live_server(ROOT / "demo" / "bootstrap.yaml", state_dir=tmp_path / "state",
                         env={"MLEMU_PROJECT": "demo"})
    commands = readme_curl_commands()
    assert len(commands) >= 4
    for method, url, body in commands:
        target = re.sub(r"^http://(127\.0\.0\.1|localhost):8080", server.url, url)
        resp = requests.request(method, target, data=body, timeout=60,
                                headers={"Content-Type": "application/json"})
        assert resp.status_code == 200, (url, resp.text)
        answer = resp.json()
        assert answer and "error" not in answer, (url, answer)
        if "predictions" in answer:
            instances = json.loads(body)["instances"]  # json.loads accepts NaN
            assert len(answer["predictions"]) == len(instances)
