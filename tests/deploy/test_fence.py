"""deploy/fence.py: mlemu's gunicorn worker runs only on a gunicorn version it was tested with and
says so in one line otherwise, at `serve` and when gunicorn reads deploy/gunicorn.conf.py;
MLEMU_WORKER_CLASS=gthread serves with gunicorn's stock worker."""

import json
import socket
import subprocess
import sys

import gunicorn
import pytest
import requests

from deploy import fence
from tests.conftest import ROOT, free_port
from tests.kit import modelkit

ROW = [1.0, 2.0, 0.5, -1.0]


def test_the_installed_gunicorn_is_a_tested_one():
    assert gunicorn.__version__ in fence.TESTED_GUNICORN
    assert fence.worker_class("mlemu") == "deploy.worker.KeepAliveThreadWorker"


def test_an_untested_gunicorn_is_refused_in_one_line_naming_both_ways_out():
    with pytest.raises(fence.UntestedGunicorn) as refused:
        fence.worker_class("mlemu", "26.1.0")
    line = str(refused.value)
    assert "\n" not in line
    assert "gunicorn 26.1.0" in line and "gunicorn==27.0.1" in line
    assert "MLEMU_WORKER_CLASS=gthread" in line


def test_stock_gthread_runs_on_any_gunicorn():
    assert fence.worker_class("gthread", "26.1.0") == "gthread"


def _with_gunicorn_version(version: str, code: str, tmp_path, **env: str):
    """Run `code` in a fresh interpreter whose gunicorn reports `version`."""
    script = f"import gunicorn\ngunicorn.__version__ = {version!r}\n{code}"
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "MLEMU_STATE_DIR": str(tmp_path / "state"),
                               "MLEMU_GRPC_PORT": "0", "MLEMU_PORT": str(free_port()), **env})


def test_serve_on_an_untested_gunicorn_fails_with_one_line(tmp_path):
    ran = _with_gunicorn_version("26.1.0", "import app\napp.main(['serve'])", tmp_path)
    assert ran.returncode == 1
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("Error: mlemu: gunicorn 26.1.0 is installed")


def test_gunicorn_reading_the_config_on_an_untested_version_fails_with_one_line(tmp_path):
    ran = _with_gunicorn_version(
        "26.1.0", "import sys\nsys.argv = ['gunicorn', '-c', 'deploy/gunicorn.conf.py', 'app:app']\n"
        "from gunicorn.app.wsgiapp import run\nrun()", tmp_path)
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines() == [str(_refusal("26.1.0"))], ran.stderr


def _refusal(version: str) -> fence.UntestedGunicorn:
    try:
        fence.worker_class("mlemu", version)
    except fence.UntestedGunicorn as exc:
        return exc
    raise AssertionError("not refused")


def test_mlemu_worker_class_gthread_serves_with_the_stock_worker(tmp_path, live_server):
    modelkit.sklearn_model(tmp_path / "v1", "logreg", seed=0)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml",
                                     {"m": {"versions": {"v1": {"deploymentUri": "v1"}}}})
    server = live_server(config, env={"MLEMU_WORKER_CLASS": "gthread"})
    answer = requests.post(f"{server.url}/v1/projects/p/models/m:predict",
                           json={"instances": [ROW]}, timeout=30)
    assert answer.status_code == 200 and answer.json() == {"predictions": [1]}
    # gunicorn's own refusal, as its stock worker writes it: an HTML page, not mlemu's JSON.
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /v2/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414")
    assert b"text/html" in head.lower() and b"<html>" in body.lower()
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
