"""Shared fixtures: an in-process app factory and a live gunicorn server factory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.settings import Settings  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def make_app(tmp_path: Path) -> Callable[..., Any]:
    """make_app(config=None, **settings) -> a Flask test client over a fresh state dir."""
    from app import create_app

    def factory(config: Path | None = None, **changes: Any) -> Any:
        settings = Settings(state_dir=tmp_path / "state", config_file=config).replace(**changes)
        flask_app = create_app(settings, warm=False)
        client = flask_app.test_client()
        client.emu = flask_app.extensions["mlemu"]  # type: ignore[attr-defined]
        return client

    return factory


def fast_path_of(flask_app: Any) -> Any:
    """The app's PredictFastPath middleware (the outermost); its `.app` is Flask without the fast
    path (under the observability middleware when present)."""
    from protocols.aiplatform import PredictFastPath

    layer = flask_app.wsgi_app
    while not isinstance(layer, PredictFastPath):
        layer = layer.app
    return layer


class LiveServer:
    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path,
                 grpc_target: str | None = None) -> None:
        self.url = url
        self.proc = proc
        self.log = log
        self.grpc_target = grpc_target  # "127.0.0.1:PORT" when started with a gRPC port

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_server(state_dir: Path, config: Path | None = None, workers: int = 1,
                 env: dict[str, str] | None = None, port: int | None = None,
                 timeout: float = 300.0, grpc_port: int = 0) -> LiveServer:
    port = port or free_port()
    state_dir.mkdir(parents=True, exist_ok=True)
    log = state_dir / f"server-{port}.log"
    cmd = [sys.executable, str(ROOT / "app.py"), "serve", "--port", str(port),
           "--workers", str(workers), "--state-dir", str(state_dir)]
    if config is not None:
        cmd += ["--config", str(config)]
    # gRPC is on by default in `serve`; tests opt in with a free port so servers never collide.
    full_env = {**os.environ, "MLEMU_GRPC_PORT": str(grpc_port), **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if requests.get(url + "/readyz", timeout=1).status_code == 200:
                if grpc_port:
                    socket.create_connection(("127.0.0.1", grpc_port), timeout=1).close()
                    return LiveServer(url, proc, log, f"127.0.0.1:{grpc_port}")
                return LiveServer(url, proc, log)
        except (requests.RequestException, OSError):
            pass
        time.sleep(0.1)
    stop_server(proc)
    raise RuntimeError(f"server did not become ready in {timeout}s:\n{log.read_text()}")


def stop_server(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """live_server(config=None, workers=1, env=None) -> a running `app.py serve` (gunicorn)."""
    started: list[LiveServer] = []

    def factory(config: Path | None = None, workers: int = 1, env: dict[str, str] | None = None,
                state_dir: Path | None = None, port: int | None = None,
                grpc_port: int = 0) -> LiveServer:
        server = start_server(state_dir or tmp_path / "live-state", config, workers, env, port,
                              grpc_port=grpc_port)
        started.append(server)
        return server

    yield factory
    for server in started:
        stop_server(server.proc)


# --- real backing services (tests/kit/services.py), one of each per test session ------------------

@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A PostgreSQL server started for the session; `postgres.new_database()` gives a fresh URL."""
    from tests.kit.services import PostgresServer

    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """gcp-storage-emulator started for the session (in memory); `.host` is STORAGE_EMULATOR_HOST."""
    from tests.kit.services import StorageEmulator

    emulator = StorageEmulator(tmp_path_factory.mktemp("gcs"))
    yield emulator
    emulator.stop()
