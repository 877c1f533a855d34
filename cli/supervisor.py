"""Process supervision for `app.py serve` when gunicorn is not alone: the gRPC server processes
of the separate layout (MLEMU_GRPC_WORKERS) as gunicorn's siblings, or a state export when
everything has stopped (--export-on-exit). By default the gunicorn workers serve gRPC themselves
(grpcserve/in_worker.py) and `serve` becomes gunicorn's master, without this parent.

Each separate gRPC server is its own process (started with exec, never forked from a process that has
imported numpy/scikit-learn/TensorFlow, whose thread pools do not survive a fork); several share
the gRPC port through SO_REUSEPORT, after cli/preflight.py made sure nobody else holds it. The
supervisor forwards SIGTERM/SIGINT to every child and exits as soon as any child exits, after
stopping the others, so a container or a test harness sees one process that lives and dies as a
unit.
"""

from __future__ import annotations

import os
import signal
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


def grpc_commands(settings: Settings) -> list[list[str]]:
    """The command lines of the separate gRPC server processes (settings.grpc_processes() of
    them; none when the gunicorn workers serve gRPC themselves). The port was checked free
    before (cli/preflight.py)."""
    count = settings.grpc_processes()
    command = [sys.executable, "-m", "grpcserve"]
    return [[*command, "--reuse-port"] if count > 1 else command for _ in range(count)]


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
    """`serve` with children to watch: gunicorn (`argv`), the separate gRPC processes if
    MLEMU_GRPC_WORKERS asks for them, and, once all have stopped, the state written to
    `export_on_exit` (cli/state.py). Returns the exit code for `serve`."""
    code = run([list(argv), *grpc_commands(settings)], env, cwd)
    if export_on_exit is not None:
        from cli.state import snapshot_file

        snapshot_file(settings, export_on_exit, restore=False)
    return code
