"""Process supervision for `app.py serve`: gunicorn and the gRPC server as sibling children.

The gRPC server is its own process (started with exec, never forked from a process that has
imported numpy/scikit-learn/TensorFlow, whose thread pools do not survive a fork). The supervisor
forwards SIGTERM/SIGINT to every child and exits as soon as any child exits, after stopping the
others, so a container or a test harness sees one process that lives and dies as a unit.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

#: How long the other children get to stop after one exits (gunicorn's graceful_timeout is 8 s).
STOP_TIMEOUT_S = 12.0


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
