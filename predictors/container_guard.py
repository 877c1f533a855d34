"""`python -I container_guard.py PARENT_PID COMMAND [ARG ...]`: runs a Vertex AI custom
container's command (predictors/container.py) and ends it when the serving process that started
it is gone.

The serving process starts this guard in a session (and process group) of its own, so stopping
the deployed model signals the group: guard and command alike. If the serving process dies
without doing so (SIGKILL, a crash), the guard sees its parent change and kills the group, so no
command outlives its server. PR_SET_PDEATHSIG is not used: it fires when the *thread* that
started the child ends, and a model may be loaded from any request thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

#: How often the guard looks for its parent; a dead server's command ends within this time.
POLL_S = 0.5


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print("usage: python -I container_guard.py PARENT_PID COMMAND [ARG ...]",
              file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[1:]
    try:  # no shell: the command is an executable and its arguments, as Docker's exec form
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    while True:
        try:
            return child.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
        if os.getppid() != parent:  # the serving process is gone: so is its container
            os.killpg(os.getpgrp(), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
