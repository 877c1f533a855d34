"""Process supervision for `app.py serve`: gunicorn and the gRPC server processes as siblings.

Each gRPC server is its own process (started with exec, never forked from a process that has
imported numpy/scikit-learn/TensorFlow, whose thread pools do not survive a fork); several share
the gRPC port through SO_REUSEPORT, after `check_port_free` made sure nobody else holds it. The
supervisor forwards SIGTERM/SIGINT to every child and exits as soon as any child exits, after
stopping the others, so a container or a test harness sees one process that lives and dies as a
unit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.settings import Settings

#: How long the other children get to stop after one exits (gunicorn's graceful_timeout is 8 s).
STOP_TIMEOUT_S = 12.0


class PortInUse(Exception):
    """The gRPC port is taken; the message is grpcserve/server.py's own words for a failed bind."""


def grpc_commands(settings: Settings) -> list[list[str]]:
    """The command lines of the gRPC server processes (settings.grpc_processes() of them),
    after checking that nothing listens on the gRPC port; PortInUse if something does."""
    try:
        check_port_free(settings.host, settings.grpc_port)
    except OSError as exc:
        raise PortInUse(f"cannot listen on {settings.host}:{settings.grpc_port}: "
                        f"{exc.strerror or exc}") from None
    command = [sys.executable, "-m", "grpcserve"]
    count = settings.grpc_processes()
    return [[*command, "--reuse-port"] if count > 1 else command for _ in range(count)]


def check_port_free(host: str, port: int) -> None:
    """Raise OSError (EADDRINUSE, ...) when a TCP listener on `host:port` could not be opened
    without SO_REUSEPORT, i.e. when any other program, or another mlemu's gRPC processes (which
    set SO_REUSEPORT), already listen there.

    gRPC processes started with SO_REUSEPORT would otherwise join such a listener silently and
    the kernel would split connections between the two servers. SO_REUSEADDR is set as gRPC core
    sets it, so connections of a previous run left in TIME_WAIT do not count as a conflict; a
    socket bound without SO_REUSEADDR, or any listening one, does. What is left is a race: a
    program that binds the port with SO_REUSEPORT, as the same user, between this check and the
    gRPC processes' bind would share it (two mlemus started at the same instant).
    """
    for family, kind, proto, _, address in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)


def run(commands: Sequence[Sequence[str]], env: Mapping[str, str], cwd: Path) -> int:
    """Start every command; return the exit code of the first one to exit."""
    children = [subprocess.Popen(list(cmd), env=dict(env), cwd=cwd) for cmd in commands]

    def forward(signum: int, frame: FrameType | None) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    by_pid = {child.pid: child for child in children}
    while True:
        pid, status = os.waitpid(-1, 0)  # retried after a signal handler runs (PEP 475)
        if pid in by_pid:
            first = by_pid[pid]
            first.returncode = os.waitstatus_to_exitcode(status)
            break
    for child in children:
        if child is not first and child.poll() is None:
            child.terminate()
    for child in children:
        if child is first:
            continue
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    code = first.returncode
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


def serve(argv: Sequence[str], env: Mapping[str, str], cwd: Path, settings: Settings,
          export_on_exit: Path | None) -> int:
    """`serve` with children to watch: gunicorn (`argv`), the gRPC processes if a gRPC port is
    set (PortInUse if the port is taken), and, once all have stopped, the state written to
    `export_on_exit` (cli/state.py). Returns the exit code for `serve`."""
    grpc = grpc_commands(settings) if settings.grpc_port else []
    code = run([list(argv), *grpc], env, cwd)
    if export_on_exit is not None:
        from cli.state import snapshot_file

        snapshot_file(settings, export_on_exit, restore=False)
    return code
