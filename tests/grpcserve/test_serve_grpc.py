"""`app.py serve`'s process layouts: by default gunicorn's workers serve gRPC too (a worker
gunicorn restarts serves it again); with MLEMU_GRPC_WORKERS gRPC processes of their own run beside
gunicorn and live and die with it; a gRPC port someone else holds fails the start."""

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
from tests.protocols.conftest import (
    descendants,
    fresh_channel,
    grpc_processes,
    link_target,
    serving_pid,
    sockets_on,
)

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


def _server_live(target: str) -> bool:
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with fresh_channel(target) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        return bool(stub.ServerLive(service_pb2.ServerLiveRequest(), timeout=30).live)


def test_serve_serves_grpc_in_its_gunicorn_workers_and_stops_them(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = start_server(state, grpc_port=free_port())
    try:
        assert b"gunicorn" in Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()  # exec'd
        procs = children(server.proc.pid)
        assert len(procs) == 1 and not any("grpcserve" in c for c in procs.values())
        assert grpc_processes(server) == set(procs)  # the worker itself listens for gRPC
        # grps starts offline; online is shared state kept in the state directory
        assert requests.get(f"{server.url}/grps/v1/health/ready", timeout=5).status_code == 503
        assert requests.get(f"{server.url}/grps/v1/health/online", timeout=5).status_code == 200
        assert requests.get(f"{server.url}/grps/v1/health/ready", timeout=5).status_code == 200
        os.kill(server.proc.pid, signal.SIGTERM)  # gunicorn's master stops its workers
        assert server.proc.wait(timeout=30) == 0
        assert not any(alive(pid) for pid in procs)
    finally:
        stop_server(server.proc)


def test_a_worker_gunicorn_restarts_serves_grpc_again(tmp_path: Path) -> None:
    server = start_server(tmp_path / "state", grpc_port=free_port())
    try:
        assert server.grpc_target and _server_live(server.grpc_target)
        (first,) = grpc_processes(server)
        os.kill(first, signal.SIGKILL)  # the worker dies; the master forks another
        deadline = time.monotonic() + 120  # a bound on a hung restart, not a speed requirement
        while not (grpc_processes(server) - {first}):
            assert server.proc.poll() is None and time.monotonic() < deadline, server.output()
            time.sleep(0.1)
        (second,) = grpc_processes(server) - {first}
        assert second in children(server.proc.pid)
        with fresh_channel(server.grpc_target) as channel:
            stub = channel.unary_unary("/inference.GRPCInferenceService/ServerLive",
                                       request_serializer=bytes, response_deserializer=bytes)
            assert stub(b"", timeout=30) == b"\x08\x01"  # live: true
            assert serving_pid(server, channel) == second
    finally:
        stop_server(server.proc)


def test_separate_grpc_processes_live_and_die_with_gunicorn(tmp_path: Path) -> None:
    """MLEMU_GRPC_WORKERS: gRPC in processes of their own beside gunicorn, under `serve`."""
    server = start_server(tmp_path / "state", grpc_port=free_port(),
                          env={"MLEMU_GRPC_WORKERS": "1"})
    try:
        procs = children(server.proc.pid)
        assert sorted("grpcserve" in c for c in procs.values()) == [False, True]
        assert any("gunicorn" in c for c in procs.values())
        assert server.grpc_target and _server_live(server.grpc_target)
        grpc_child = next(p for p, c in procs.items() if "grpcserve" in c)
        assert grpc_processes(server) == {grpc_child}  # the workers do not serve gRPC then
        os.kill(grpc_child, signal.SIGKILL)  # one child dies: the whole server goes down
        assert server.proc.wait(timeout=30) == 128 + signal.SIGKILL
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{server.url}/healthz", timeout=5)
    finally:
        stop_server(server.proc)


def test_grpc_port_zero_serves_http_only(tmp_path: Path) -> None:
    server = start_server(tmp_path / "state")  # start_server passes MLEMU_GRPC_PORT=0
    try:
        cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
        assert b"gunicorn" in cmdline  # app.py exec'd gunicorn: no supervisor, no gRPC process
        assert not any("grpcserve" in c for c in children(server.proc.pid).values())
        # nor does a worker listen on anything but the HTTP port
        http_port = int(server.url.rsplit(":", 1)[1])
        listening = {inode for port in _listening_ports() - {http_port}
                     for inode in sockets_on(port, state="0A")}
        for pid in descendants(server.proc.pid):
            assert not any(link_target(fd) in listening for fd in Path(f"/proc/{pid}/fd").iterdir())
    finally:
        stop_server(server.proc)


def _listening_ports() -> set[int]:
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


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


def test_a_grpc_port_another_program_shares_fails_the_start(tmp_path: Path) -> None:
    """A listener that set SO_REUSEPORT itself would let every worker join it silently (the
    kernel would then split connections between the two servers): `serve` refuses it first."""
    import socket

    with socket.socket() as stranger:
        stranger.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        with pytest.raises(RuntimeError, match="server exited") as caught:
            start_server(tmp_path / "state", grpc_port=port, timeout=60)
    assert f"cannot listen on 127.0.0.1:{port}" in str(caught.value)
    assert "Traceback" not in str(caught.value)


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
