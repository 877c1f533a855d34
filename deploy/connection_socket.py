"""The socket of one accepted client connection, with the system calls a request does not need
left out.

Why: every blocking call on a socket (and every `setblocking`/`settimeout`, an ioctl) releases
the GIL and takes it back. With several threads of one worker busy, each release is a point where
the request's thread can lose the GIL for a whole turn of another request, so the number of these
calls per request shows in the tail latency as much as in the CPU time. strace of a one-row
`:predict` on a kept-alive connection under gunicorn 27's gthread code (2026-11-24) counted 12
per request: poll, recv, five FIONBIO ioctls, the store's change query and two sendto (the
response head and its body, written separately by gunicorn's `Response.write`). A request needs
three: poll for it, recv it, send the answer. This class removes the ioctls and the second send;
deploy/worker.py the drain ioctls, registry/change_signal.py the store query.

- `setblocking`/`settimeout` with the mode the socket already has do nothing. gthread's
  `handle` and gunicorn's parser (`Parser.finish_body` restores the prior timeout in a `finally`)
  set the mode on every request whether it changed or not. The check reads Python's own record
  of the mode (`gettimeout`, no system call), which every mode change goes through.
- Between `cork()` and `uncork()` small writes are collected and sent as one: the response head
  and a small body leave in one segment, as most servers send them. A write larger than
  `CORK_LIMIT`, `send`, `sendfile` or the end of the response send what was collected first, in
  order, so nothing is reordered or held back past the response.
"""

from __future__ import annotations

import socket
from typing import Any

#: Most bytes collected before they are sent: a larger answer goes out as it is written.
CORK_LIMIT = 64 * 1024


class ConnectionSocket(socket.socket):
    """A client connection's socket (see the module docstring)."""

    __slots__ = ("_corked", "_corked_size")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._corked: list[bytes] | None = None
        self._corked_size = 0

    @classmethod
    def adopt(cls, sock: socket.socket) -> ConnectionSocket:
        """The same connection as `sock` (which must not be used afterwards), as this class.
        socket.accept() always builds a plain socket, so the accepted one hands over its
        descriptor; its timeout mode carries over."""
        timeout = sock.gettimeout()
        adopted = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        adopted.settimeout(timeout)
        return adopted

    def settimeout(self, value: float | None) -> None:
        if value != self.gettimeout():
            super().settimeout(value)

    def setblocking(self, flag: bool) -> None:
        self.settimeout(None if flag else 0.0)

    def cork(self) -> None:
        """Collect writes from now on, until `uncork()`."""
        self.uncork()
        self._corked = []

    def uncork(self) -> None:
        """Send what was collected, and write through from now on."""
        try:
            self._flush()
        finally:
            self._corked = None

    def _flush(self) -> None:
        """Send what was collected (one write), collecting on."""
        if self._corked:
            corked, self._corked, self._corked_size = self._corked, [], 0
            super().sendall(b"".join(corked))

    def sendall(self, data: Any, flags: int = 0) -> None:
        if self._corked is not None:
            size = len(memoryview(data).cast("B"))
            if not flags and self._corked_size + size <= CORK_LIMIT:
                self._corked.append(bytes(data))
                self._corked_size += size
                return
            self._flush()
        super().sendall(data, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        self._flush()
        return super().send(data, flags)

    def sendfile(self, file: Any, offset: int = 0, count: int | None = None) -> int:
        self._flush()
        return super().sendfile(file, offset, count)
