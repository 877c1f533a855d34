"""A full state disk (a 16 MiB tmpfs mounted for the test, then filled): predictions go on
(metrics degrade), writes answer 503, /readyz says why, a worker killed meanwhile is replaced,
and once space returns writes succeed again and /readyz is ready. Also `serve` with a metrics
directory it cannot write fails with one line.

The mount needs root (the test runs as root, as the sandbox and the CI image do)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import ROOT, free_port, stop_server
from tests.kit import modelkit

pytestmark = pytest.mark.slow

ROW = [5.1, 3.5, 1.4, 0.2]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write zeros until the filesystem refuses (ENOSPC); the file that holds them."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    assert os.statvfs(disk).f_bavail == 0
    return filler


def start(state: Path, config: Path, log: Path, workers: int = 2) -> tuple[str, Any]:
    port = free_port()
    env = {**os.environ, "MLEMU_GRPC_PORT": "0", "MLEMU_PROJECT": "p"}
    with open(log, "wb") as out:  # the server's own output stays off the small disk
        proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "serve", "--port",
                                 str(port), "--workers", str(workers), "--state-dir", str(state),
                                 "--config", str(config)], stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{url}/readyz", timeout=2).status_code == 200:
                return url, proc
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def predict(url: str, model: str = "iris") -> int:
    answer = requests.post(f"{url}/v1/projects/p/models/{model}:predict",
                           json={"instances": [ROW]}, timeout=30)
    return answer.status_code


def worker_pids(master: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def gunicorn_master(proc: Any) -> int:
    """`serve` execs gunicorn in place when gRPC is off: the process is the master."""
    return int(proc.pid)


def test_a_full_state_disk_keeps_predictions_and_recovers(tmp_path: Path,
                                                         small_disk: Path) -> None:
    modelkit.sklearn_model(tmp_path / "iris")
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(tmp_path / "iris")}}}})
    log = tmp_path / "server.log"
    url, proc = start(small_disk / "state", config, log)
    try:
        assert predict(url) == 200
        filler = fill(small_disk)
        # Predictions on every route and protocol (new metric series each), all answered.
        paths = [("/v1/projects/p/models/iris:predict", {"instances": [ROW]}),
                 ("/v1/projects/p/models/iris/versions/v1:predict", {"instances": [ROW]}),
                 ("/v1/models/iris:predict", {"instances": [ROW]}),
                 ("/v2/models/iris/infer", {"inputs": [{"name": "x", "shape": [1, 4],
                                                        "datatype": "FP64", "data": ROW}]})]
        for _ in range(30):
            for path, body in paths:
                answer = requests.post(url + path, json=body, timeout=30)
                assert answer.status_code == 200, (path, answer.text, log.read_text()[-3000:])
        for n in range(300):  # unknown models: 404s, counted (new keys in the metric files)
            requests.post(f"{url}/v1/projects/p/models/nope{n}:predict", json={}, timeout=30)
        assert requests.get(f"{url}/metrics", timeout=30).status_code == 200
        # Writes answer 503 UNAVAILABLE saying the disk is full; readiness says why.
        created = requests.post(f"{url}/v1/projects/p/models", json={"name": "m2"}, timeout=30)
        assert created.status_code == 503, created.text
        assert "full" in created.json()["error"]["message"]
        ready = requests.get(f"{url}/readyz", timeout=10)
        assert ready.json()["status"] == "degraded", ready.text
        assert "no space left" in ready.json()["problems"][0]
        # A worker killed now is replaced (its bootstrap cannot write), and serves.
        master = gunicorn_master(proc)
        before = worker_pids(master)
        os.kill(before[0], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while len(set(worker_pids(master)) - set(before)) < 1:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        for _ in range(20):
            assert predict(url) == 200
        assert proc.poll() is None
        # Space returns: writes succeed, readiness is back, metrics answer.
        filler.unlink()
        created = requests.post(f"{url}/v1/projects/p/models", json={"name": "m3"}, timeout=30)
        assert created.status_code == 200, created.text
        # Each worker puts its metrics back into their files within metric_files.RETRY_S.
        deadline, streak = time.monotonic() + 60, 0
        while streak < 6:  # both workers answer ready (the kernel spreads the probes)
            ready = requests.get(f"{url}/readyz", timeout=10).json()
            streak = streak + 1 if ready["status"] == "ready" else 0
            assert time.monotonic() < deadline, ready
            time.sleep(0.1 if streak else 0.5)
            assert predict(url) == 200
        assert requests.get(f"{url}/metrics", timeout=30).status_code == 200
        assert "Traceback" not in log.read_text(), log.read_text()[-5000:]
    finally:
        stop_server(proc)


def test_serve_with_an_unwritable_metrics_directory_fails_in_one_line(tmp_path: Path,
                                                                      small_disk: Path) -> None:
    state = small_disk / "state"
    metrics = state / "metrics"
    metrics.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(metrics)], check=True)
    try:
        (metrics / "counter_1.db").write_bytes(b"\0" * 64)  # a previous run's file
        subprocess.run(["mount", "-o", "remount,ro", str(metrics)], check=True)
        answer = subprocess.run([sys.executable, str(ROOT / "app.py"), "serve", "--port",
                                 str(free_port()), "--state-dir", str(state)],
                                capture_output=True, text=True, timeout=60,
                                env={**os.environ, "MLEMU_GRPC_PORT": "0"})
    finally:
        subprocess.run(["umount", "-l", str(metrics)], check=False)
    assert answer.returncode != 0
    assert "Traceback" not in answer.stderr, answer.stderr
    lines = [line for line in answer.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "metrics" in lines[0], answer.stderr
