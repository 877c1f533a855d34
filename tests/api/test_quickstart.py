"""The README's quick start: the demo models `make serve` bundles answer every README curl line,
the README's Python snippets run as written, `./mlemu` finds the server's project, and the server
prints no TensorFlow / absl / oneDNN banners."""

import json
import re
import shlex
import subprocess
import sys

import pytest
import requests

from tests.conftest import ROOT, start_server, stop_server


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


def readme_python_snippets():
    """Every ```python block of the README but the IAM section's (they need the key files and
    IAM configuration that section has the reader create first)."""
    text = (ROOT / "README.md").read_text()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    return [block for section in sections if not section.startswith("IAM")
            for block in re.findall(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)]


#: What TensorFlow, absl and oneDNN print on their own when a process imports TensorFlow.
BANNERS = ("oneDNN", "absl::InitializeLog", "cpu_feature_guard", "is deprecated",
           "Restoring parameters")


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    """`make serve`'s server: the demo models, project `demo` (TensorFlow's loaded at warm-up)."""
    subprocess.run([sys.executable, str(ROOT / "demo" / "make_models.py")], check=True)
    server = start_server(tmp_path_factory.mktemp("quickstart") / "state",
                          ROOT / "demo" / "bootstrap.yaml", env={"MLEMU_PROJECT": "demo"})
    yield server
    stop_server(server.proc)


def test_readme_curl_examples_answer_with_predictions(demo_server):
    server = demo_server
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


def test_readme_python_snippets_run_as_written(demo_server):
    snippets = readme_python_snippets()
    assert snippets, "the README has Python examples"
    for snippet in snippets:
        code = snippet.replace("http://127.0.0.1:8080", demo_server.url)
        run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, (snippet, run.stderr)
        if "predict(" in snippet:
            assert run.stdout.startswith("{'predictions': ["), run.stdout


def test_the_launcher_lists_the_servers_project(demo_server):
    """`./mlemu models list` (what `make serve` suggests) with no --project finds `demo`, the
    project the server serves; another project's empty list names the server's."""
    listed = subprocess.run([str(ROOT / "mlemu"), "models", "list", "--url", demo_server.url],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert {"iris", "census_xgb", "threshold", "half_plus_three"} <= set(names)
    other = subprocess.run([str(ROOT / "mlemu"), "models", "list", "--url", demo_server.url,
                            "--project", "mlemu"], capture_output=True, text=True, timeout=120)
    assert other.returncode == 0 and other.stdout.strip() == "NAME  DEFAULT_VERSION_NAME"
    assert other.stderr.strip() == ("Listed 0 models in project [mlemu]; the server's default "
                                    "project is [demo] (--project demo).")


def test_serve_prints_no_native_banners(demo_server):
    requests.post(f"{demo_server.url}/v1/models/half_plus_three:predict",
                  json={"instances": [1.0]}, timeout=60).raise_for_status()
    output = demo_server.output()
    assert "Listening at" in output  # the log is the server's
    assert [banner for banner in BANNERS if banner in output] == [], output
