"""One deadline for a whole request, for what a worker thread still reads itself.

deploy/worker.py reads a request in the worker's main loop, without a thread, until it is
complete (deploy/request_buffer.py). A body larger than that buffer's bound is read by the thread
gunicorn's parser runs in; this socket keeps that read under the same deadline as the rest of
the request, not a per-recv() timeout that a client sending a byte at a time would reset forever.
"""

from __future__ import annotations

import select
import time
from typing import Any


def readable(sock: Any, timeout_s: float) -> bool:
    """Whether `sock` has data (or EOF) within `timeout_s`; poll() takes any descriptor number."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


class DeadlineSocket:
    """The socket gunicorn's parser reads a request from, with one deadline (time.monotonic)
    for the whole request."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self.deadline = deadline

    def recv(self, size: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not readable(self._sock, remaining):
            raise TimeoutError("the request was not received within the server's time limit")
        return self._sock.recv(size)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)
