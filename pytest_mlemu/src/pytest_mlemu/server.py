"""A session's mlemu server: started from a checkout or an installed `mlemu` command on free
ports with a temporary state directory, or an existing server (a container) named by URL."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from pytest_mlemu.client import Mlemu

READY_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlemuServer:
    """A running mlemu: `url`, `grpc_target` (host:port, None when unknown) and `controls`."""

    def __init__(self, url: str, grpc_target: str | None = None,
                 process: subprocess.Popen[bytes] | None = None, log: Path | None = None):
        self.url = url.rstrip("/")
        self.grpc_target = grpc_target
        self.process = process
        self.log = log
        self.controls = Mlemu(self.url)

    @property
    def project(self) -> str:
        """The server's default project (what TF Serving, V2 and grps serve)."""
        return str(requests.get(f"{self.url}/healthz", timeout=30).json().get("project", ""))

    @classmethod
    def start(cls, command: list[str], state_dir: Path, *, bootstrap: Path | None = None,
              workers: int = 1, env: dict[str, str] | None = None) -> MlemuServer:
        """Run `command serve ...` (e.g. [python, app.py] of a checkout, or ["mlemu"])."""
        port, grpc_port = free_port(), free_port()
        state_dir.mkdir(parents=True, exist_ok=True)
        argv = [*command, "serve", "--port", str(port), "--workers", str(workers),
                "--state-dir", str(state_dir)]
        if bootstrap is not None:
            argv += ["--config", str(bootstrap)]
        log = state_dir / "mlemu-server.log"
        full_env = {**os.environ, "MLEMU_GRPC_PORT": str(grpc_port), **(env or {})}
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                       start_new_session=True)
        server = cls(f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}", process, log)
        server.wait_ready()
        return server

    @classmethod
    def attach(cls, url: str, grpc_target: str | None = None) -> MlemuServer:
        server = cls(url, grpc_target)
        server.wait_ready()
        return server

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"mlemu exited with {self.process.returncode}: "
                                   f"{self._tail()}")
            try:
                if requests.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"mlemu at {self.url} was not ready within {timeout:.0f}s. "
                           f"{self._tail()}")

    def _tail(self) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """Stop a server this session started (an attached one is left running)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def command_for(checkout: str | None, command: str | None) -> list[str]:
    """How to run mlemu: a checkout's app.py (with its .venv's Python when it has one), an
    explicit command, or the `mlemu` found on PATH."""
    if checkout:
        root = Path(checkout).resolve()
        python = root / ".venv" / "bin" / "python"
        return [str(python if python.exists() else sys.executable), str(root / "app.py")]
    if command:
        return command.split()
    found = shutil.which("mlemu")
    if found is None:
        raise RuntimeError("pytest-mlemu needs a server: pass --mlemu-url (a running server), "
                           "--mlemu-checkout (an mlemu source tree) or --mlemu-command, or put "
                           "`mlemu` on PATH.")
    return [found]
