"""Answers the worker writes itself, before (or instead of) the app: JSON in the protocol's shape.

gunicorn answers a request it cannot parse with an HTML page (gunicorn/util.py `write_error`, for
the statuses of gunicorn/workers/base.py `handle_error`: 400 bad request line, header or chunk
size, 414 request line too long, 431 headers too large, 501 unsupported transfer coding, ...). No
client of the emulated APIs parses HTML, so the worker keeps gunicorn's status and reason and
writes the body in the shape of the route's protocol, as the app's own errors are (api/__init__.py):
the Google error object under /v1/projects and /_mlemu/ (the controls), grps's
`{"status": {...}}` under /grps/, and `{"error": "..."}` (TF Serving, V2) elsewhere or when not
even the path could be read.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from core.errors import Code

#: google.rpc codes for the statuses gunicorn and the read deadline answer with.
_CODES = {400: Code.INVALID_ARGUMENT, 403: Code.PERMISSION_DENIED, 408: Code.DEADLINE_EXCEEDED,
          414: Code.INVALID_ARGUMENT, 417: Code.FAILED_PRECONDITION, 431: Code.INVALID_ARGUMENT,
          501: Code.UNIMPLEMENTED}


def body_for(path: str | None, status: int, message: str) -> bytes:
    """The error body for `path` (None: unknown)."""
    path = path or ""
    if path.startswith(("/v1/projects", "/_mlemu/")):
        code = _CODES.get(status, Code.INTERNAL)
        body: Any = {"error": {"code": status, "message": message, "status": code.name}}
    elif path.startswith("/grps/"):
        body = {"status": {"code": status, "msg": message, "status": "FAILURE"}}
    else:
        body = {"error": message}
    return json.dumps(body).encode()


def response(path: str | None, status: int, reason: str, message: str) -> bytes:
    """A complete `Connection: close` HTTP/1.1 response carrying the JSON error."""
    body = body_for(path, status, message)
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


def request_path(head: bytes) -> str | None:
    """The path of a request line, if the bytes hold one."""
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    if len(parts) < 2 or not parts[1].startswith(b"/"):
        return None
    return parts[1].split(b"?", 1)[0].decode("latin-1")


def send_timeout(sock: Any, received: bytes, head_complete: bool) -> None:
    """408 for a request that missed its read deadline (best effort: the client may be gone)."""
    what = "request body" if head_complete else "request headers"
    message = f"Request Timeout: the {what} did not arrive within the server's time limit."
    with contextlib.suppress(OSError):
        sock.send(response(request_path(received), 408, "Request Timeout", message))


class CapturedSocket:
    """Stands in for the client socket while gunicorn's handle_error runs: it keeps the status
    line gunicorn would send (the HTML that follows is dropped)."""

    def __init__(self) -> None:
        self.data = b""

    def gettimeout(self) -> float:
        return 0.0

    def setblocking(self, flag: bool) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        self.data += data

    send = sendall

    def status(self) -> tuple[int, str]:
        line = self.data.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        try:
            return int(line[1]), line[2] if len(line) > 2 else ""
        except (IndexError, ValueError):
            return 500, "Internal Server Error"


def gunicorn_error(path: str | None, captured: CapturedSocket, exc: Exception) -> bytes:
    """The JSON answer to a request for `path` for what gunicorn's handle_error wrote into
    `captured`."""
    status, reason = captured.status()
    if status >= 500 and status != 501:
        message = "Internal error encountered."
    else:
        message = f"{reason}: {exc}" if str(exc) else reason
    return response(path, status, reason, message)
