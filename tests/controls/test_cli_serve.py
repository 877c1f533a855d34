"""`mlemu admin ...` against a live server, and `serve --export-on-exit` / `serve --import`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from app import main
from tests.conftest import ROOT, free_port
from tests.kit import modelkit

pytestmark = pytest.mark.slow
ROWS = [[0.5, -1.0, 2.0, 0.1]]


def serve(state: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "app.py"), "serve", "--port", str(port), "--state-dir",
             str(state), *extra], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "MLEMU_GRPC_PORT": "0"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, (state / "server.log").read_text()
        try:
            if requests.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError((state / "server.log").read_text())


def stop(proc: subprocess.Popen[bytes]) -> int:
    os.killpg(proc.pid, signal.SIGTERM)
    return proc.wait(timeout=60)


def admin(url: str, *args: str) -> Any:
    result = CliRunner().invoke(main, ["admin", "--url", url, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_admin_cli_and_a_state_carried_from_one_server_to_the_next(tmp_path: Path) -> None:
    modelkit.sklearn_model(tmp_path / "iris")
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(tmp_path / "iris")}}}}, project="p")
    archive = tmp_path / "state.tar.gz"
    proc, url = serve(tmp_path / "one", "--config", str(config), "--export-on-exit", str(archive))
    try:
        rule = json.loads(admin(url, "faults", "add", json.dumps(
            {"match": {"method": "predict"}, "error": {"code": 429}, "times": 1})))
        assert rule["id"] and rule["error"]["status"] == "RESOURCE_EXHAUSTED"
        predict = f"{url}/v1/projects/p/models/iris:predict"
        assert requests.post(predict, json={"instances": ROWS}, timeout=30).status_code == 429
        assert requests.post(predict, json={"instances": ROWS}, timeout=30).status_code == 200
        assert [r["hits"] for r in json.loads(admin(url, "faults", "list"))["faults"]] == [1]
        calls = json.loads(admin(url, "requests", "--filter", "method=predict"))["requests"]
        assert [c["status"] for c in calls] == [429, 200]
        assert json.loads(admin(url, "requests", "--filter", "status=429", "--limit", "5"))[
            "requests"][0]["model"] == "iris"
        admin(url, "timing", "set", '{"operationType": "DELETE_VERSION", "after": {"polls": 2}}')
        assert json.loads(admin(url, "timing", "list"))["timing"][0]["after"] == {"polls": 2}
        admin(url, "timing", "clear")
        admin(url, "faults", "clear")
        admin(url, "requests", "clear")
        assert json.loads(admin(url, "requests"))["requests"] == []
        requests.post(f"{url}/v1/projects/p/models", json={"name": "kept",
                                                           "description": "carried over"},
                      timeout=30).raise_for_status()
        admin(url, "snapshot", "export", str(tmp_path / "by-hand.tar.gz"))
        admin(url, "reset", "--project", "p")
        assert requests.get(f"{url}/v1/projects/p/models/kept", timeout=30).status_code == 404
        admin(url, "snapshot", "import", str(tmp_path / "by-hand.tar.gz"))
        assert requests.get(f"{url}/v1/projects/p/models/kept", timeout=30).status_code == 200
    finally:
        stop(proc)
    assert archive.exists()

    proc, url = serve(tmp_path / "two", "--import", str(archive))
    try:
        kept = requests.get(f"{url}/v1/projects/p/models/kept", timeout=30).json()
        assert kept["description"] == "carried over"
        answer = requests.post(f"{url}/v1/projects/p/models/iris:predict",
                               json={"instances": ROWS}, timeout=30)
        assert answer.status_code == 200 and len(answer.json()["predictions"]) == 1
    finally:
        stop(proc)


def test_a_bad_archive_stops_serve_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"no archive")
    run = subprocess.run([sys.executable, str(ROOT / "app.py"), "serve", "--state-dir",
                          str(tmp_path / "s"), "--import", str(bad)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode != 0
    assert "refused (nothing was changed)" in run.stderr and "Traceback" not in run.stderr


def test_the_cli_reports_a_refused_control(tmp_path: Path) -> None:
    proc, url = serve(tmp_path / "s")
    try:
        result = CliRunner().invoke(main, ["admin", "--url", url, "faults", "add", "{}"])
        assert result.exit_code == 1
        assert "400: Invalid fault rule: a rule needs an error" in result.output
    finally:
        stop(proc)


def test_a_new_run_of_serve_starts_without_the_last_runs_controls(tmp_path: Path) -> None:
    proc, url = serve(tmp_path / "s")
    try:
        requests.post(f"{url}/_mlemu/faults", json={"delayMs": 1}, timeout=30).raise_for_status()
        requests.post(f"{url}/v1/projects/p/models", json={"name": "kept"},
                      timeout=30).raise_for_status()
        assert json.loads(admin(url, "requests"))["requests"]
    finally:
        stop(proc)
    proc, url = serve(tmp_path / "s")
    try:
        assert json.loads(admin(url, "faults", "list")) == {"faults": []}
        assert json.loads(admin(url, "requests"))["requests"] == []
        assert requests.get(f"{url}/v1/projects/p/models/kept", timeout=30).status_code == 200
    finally:
        stop(proc)
