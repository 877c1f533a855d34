"""HTTP plumbing shared by the protocol adapters: the request's verified caller, bounded body
reading, and JSON responses."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from typing import IO, Any

from flask import Response, current_app, g, request

import auth
from core import wirejson
from core.errors import ApiError, DeadlineExceeded, InvalidArgument
from core.payloads import Caller


def request_caller() -> Caller:
    """The verified caller of the current request, identified once per request (flask.g)."""
    caller = g.get("mlemu_caller")
    if caller is None:
        caller = g.mlemu_caller = auth.identify(current_app.extensions["mlemu"], request.headers)
    return caller  # type: ignore[no-any-return]


def client_gone() -> Callable[[], bool]:
    """A check, for long work on the current request's thread, of whether its client has closed
    the connection (then nobody will read the answer). Under gunicorn the request's socket is
    in the environ: readable with nothing to read means the peer closed it (bytes of a
    pipelined next request also make it readable; those are left unread). Elsewhere (the test
    client) the answer is always no."""
    sock = request.environ.get("gunicorn.socket")
    if sock is None:
        return lambda: False

    def gone() -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):  # reset by the peer, or closed under us
            return True
    return gone


def payload_too_large(limit: int) -> InvalidArgument:
    return InvalidArgument(f"Request payload size exceeds the limit: {limit} bytes.")


def read_body(limit: int) -> bytes:
    """The request body, refusing (before reading it all) anything larger than `limit` bytes."""
    return read_limited(request.stream, request.content_length, limit)


def read_limited(stream: IO[bytes], length: int | None, limit: int) -> bytes:
    """A body of declared `length` (None: chunked) from `stream`, at most `limit` bytes."""
    if length is not None and length > limit:
        raise payload_too_large(limit)
    # Chunked bodies have no length: read one byte past the limit to tell.
    try:
        data = stream.read(limit + 1)
    except TimeoutError as exc:  # deploy/worker.py's read deadline
        raise DeadlineExceeded(f"Request Timeout: {exc}.", http_status=408) from None
    except Exception as exc:  # noqa: BLE001 - the server's body reader: bad framing, early EOF
        # gunicorn raises its own errors (InvalidChunkSize, NoMoreData, ...) from the body stream.
        raise InvalidArgument(f"The request body could not be read: {exc}") from None
    if len(data) > limit:
        raise payload_too_large(limit)
    return data


def decode_json(data: bytes) -> Any:
    """Parse a JSON body (NaN/Infinity allowed); a clear INVALID_ARGUMENT otherwise."""
    if not data.strip():
        raise InvalidArgument("Invalid JSON payload received. The request body is empty.")
    try:
        return wirejson.loads(data)
    except wirejson.DecodeError as exc:
        raise InvalidArgument(f"Invalid JSON payload received. {exc}") from None


def json_response(body: Any, status: int = 200) -> Response:
    return Response(wirejson.dumps(body), status=status, mimetype="application/json")


def error_json(exc: ApiError, message: str | None = None) -> Response:
    """`{"error": "..."}` (TF Serving, V2), with the error's headers (401's WWW-Authenticate)."""
    response = json_response({"error": exc.message if message is None else message},
                             exc.http_status)
    response.headers.extend(exc.headers)
    return response
