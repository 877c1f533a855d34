"""`app.py serve` runs gunicorn and the gRPC server as sibling processes that live and die together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, start_server, stop_server

pytestmark = pytest.mark.slow


def children(pid: int) -> dict[int, str]:
    """Child pid -> command line, from /proc."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            found[int(child)] = cmdline
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_serve_starts_grpc_beside_gunicorn_and_stops_both(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = start_server(state, grpc_port=free_port())
    try:
        procs = children(server.proc.pid)
        assert sorted("grpcserve" in c for c in procs.values()) == [False, True]
        assert any("gunicorn" in c for c in procs.values())
        # grps starts offline; online is shared state kept in the state directory
        assert requests.get(f"{server.url}/grps/v1/health/ready", timeout=5).status_code == 503
        assert requests.get(f"{server.url}/grps/v1/health/online", timeout=5).status_code == 200
        assert requests.get(f"{server.url}/grps/v1/health/ready", timeout=5).status_code == 200
        os.kill(server.proc.pid, signal.SIGTERM)  # the supervisor only: it forwards the signal
        assert server.proc.wait(timeout=30) == 0
        assert not any(alive(pid) for pid in procs)
    finally:
        stop_server(server.proc)

    again = start_server(state, grpc_port=free_port())
    try:
        # a restarted server is offline again, whatever the previous one was told
        assert requests.get(f"{again.url}/grps/v1/health/ready", timeout=5).status_code == 503
        grpc_child = next(p for p, c in children(again.proc.pid).items() if "grpcserve" in c)
        os.kill(grpc_child, signal.SIGKILL)  # one child dies: the whole server goes down
        assert again.proc.wait(timeout=30) == 128 + signal.SIGKILL
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{again.url}/healthz", timeout=5)
    finally:
        stop_server(again.proc)


def test_grpc_port_zero_serves_http_only(tmp_path: Path) -> None:
    server = start_server(tmp_path / "state")  # start_server passes MLEMU_GRPC_PORT=0
    try:
        cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
        assert b"gunicorn" in cmdline  # app.py exec'd gunicorn: no supervisor, no gRPC process
        assert not any("grpcserve" in c for c in children(server.proc.pid).values())
    finally:
        stop_server(server.proc)


def test_grpc_server_refuses_to_start_without_a_port(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "grpcserve"],
        env={**os.environ, "MLEMU_GRPC_PORT": "0", "MLEMU_STATE_DIR": str(tmp_path)},
        cwd=root, capture_output=True, timeout=60, check=False)
    assert result.returncode == 2
    assert b"gRPC is disabled" in result.stderr


def test_grpc_port_in_use_fails_the_whole_server(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: start_server's probe cannot connect
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="server exited") as caught:
            start_server(tmp_path / "state", grpc_port=port, timeout=60)
    assert f"cannot listen on 127.0.0.1:{port}" in str(caught.value)


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_sigterm_while_the_grpc_process_starts_ends_it_cleanly(tmp_path: Path) -> None:
    """`serve` may stop while a gRPC process still imports the server: SIGTERM then ends that
    process with status 0 (not -15, which `serve` would report as its own failure), whether it
    arrives before the process listens or after."""
    import socket

    root = Path(__file__).resolve().parents[2]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "grpcserve"], cwd=root, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "MLEMU_GRPC_PORT": str(port), "MLEMU_STATE_DIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 60  # a bound on a hung start, not a speed requirement
        while not _catches_sigterm(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.002)
        # The handler is there before the server is imported, so long before it listens.
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out.decode(errors="replace")
