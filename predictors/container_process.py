"""One Vertex AI custom container's command as a local process: started (no shell) under
predictors/container_guard.py in a process group of its own, its output kept (the last lines,
bounded) and logged, its health route polled until it answers 200, HTTP calls to it bounded in
time and size, and the whole group ended on `stop` (or when the object is collected).
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import IO

from core.errors import DeadlineExceeded, FailedPrecondition, Unavailable, public_text

log = logging.getLogger("mlemu.container")

#: The guard runs as a script in isolated mode (-I: no PYTHON* variables, not its directory on
#: sys.path): it needs only the standard library, whatever PYTHONPATH found mlemu.
GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "container_guard.py")
#: Output lines kept for a failed start's message (the last ones), and the bytes of each.
TAIL_LINES, LINE_BYTES = 20, 500
#: Seconds between health checks while starting, and the bound on one check.
HEALTH_POLL_S, HEALTH_CALL_S = 0.1, 5.0
#: Seconds a stopped group has between SIGTERM and SIGKILL (Kubernetes' grace is 30 s; a local
#: process that ignores SIGTERM need not hold an undeploy that long).
STOP_GRACE_S = 5.0


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the guard's group, SIGKILL it after STOP_GRACE_S; idempotent."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # nobody left in the group
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the guard is gone; its command may linger in the group until SIGKILL
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
    if proc.stdout is not None:
        proc.stdout.close()


def _read_output(stream: IO[bytes] | None, tail: collections.deque[str], label: str) -> None:
    """Keep the last lines of the command's output and log every line (a container's stdout
    and stderr go to Cloud Logging on Vertex AI)."""
    assert stream is not None
    try:
        for raw in iter(stream.readline, b""):
            line = raw[:LINE_BYTES].decode("utf-8", "replace").rstrip()
            tail.append(line)
            log.info("container %s: %s", label, line)
    except (OSError, ValueError):  # closed by stop
        pass


class ContainerProcess:
    """A running command listening on 127.0.0.1:`port`."""

    def __init__(self, command: list[str], env: Mapping[str, str], port: int, label: str) -> None:
        self.port = port
        self.label = label
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", GUARD, str(os.getpid()), *command],
                env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        except OSError as exc:
            raise FailedPrecondition(f"Could not start the container command: {exc}") from None
        self._finalizer = weakref.finalize(self, _end_group, self._proc)
        # The reader holds the stream and the deque, never `self`, so a forgotten process is
        # collected (and its group ended by the finalizer) while its reader still runs.
        self._reader = threading.Thread(
            target=_read_output, args=(self._proc.stdout, self._tail, label),
            name=f"mlemu-container-{port}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The process group's id (the guard's pid)."""
        return self._proc.pid

    def output_tail(self) -> str:
        """Its last output lines, without this machine's paths (they go to a client)."""
        return public_text("\n".join(self._tail)) or "(no output)"

    def exit_code(self) -> int | None:
        return self._proc.poll()

    def wait_healthy(self, route: str, bound_s: float,
                     clock: Callable[[], float] = time.monotonic) -> None:
        """Return once GET `route` answers 200; FailedPrecondition (with its last output) when
        the process exits first or `bound_s` seconds pass."""
        deadline = clock() + bound_s
        while True:
            code = self.exit_code()
            if code is not None:
                self._reader_done()
                self.stop()
                raise FailedPrecondition(
                    f"The container's command exited with status {code} before its health route "
                    f"{route} answered 200. Its last output:\n{self.output_tail()}")
            try:
                status, _, _ = self.request("GET", route, b"", "", HEALTH_CALL_S, 1 << 20)
                if status == 200:
                    return
            except (DeadlineExceeded, Unavailable):
                pass
            if clock() >= deadline:
                self.stop()
                raise FailedPrecondition(
                    f"The container's health route {route} did not answer 200 within "
                    f"{bound_s:g} s (MLEMU_VERTEX_CONTAINER_START_S). Its last output:\n"
                    f"{self.output_tail()}")
            time.sleep(HEALTH_POLL_S)

    def _reader_done(self) -> None:
        """Give the output reader a moment to take the exited process's last lines."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2.0)
        self._reader.join(timeout=2.0)

    def request(self, method: str, route: str, body: bytes, content_type: str,
                timeout_s: float, max_bytes: int) -> tuple[int, str, bytes]:
        """(status, content type, body) of one call: DEADLINE_EXCEEDED past `timeout_s`;
        UNAVAILABLE when it cannot be reached or answers more than `max_bytes`."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        try:
            headers = {"Content-Type": content_type} if content_type else {}
            conn.request(method, route, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read(max_bytes + 1)
        except TimeoutError:
            raise DeadlineExceeded(
                f"The container did not answer {route} within {timeout_s:g} s "
                "(MLEMU_VERTEX_CONTAINER_TIMEOUT_S).") from None
        except (OSError, http.client.HTTPException) as exc:
            raise Unavailable(f"The container is not reachable: {type(exc).__name__}.") from None
        finally:
            conn.close()
        if len(data) > max_bytes:
            raise Unavailable(f"The container's response is larger than {max_bytes} bytes.")
        return resp.status, resp.getheader("Content-Type", ""), data

    def stop(self) -> None:
        self._finalizer()

    @property
    def running(self) -> bool:
        return self._finalizer.alive and self._proc.poll() is None
