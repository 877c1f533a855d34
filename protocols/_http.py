"""HTTP plumbing shared by the protocol adapters: bounded body reading and JSON responses."""

from __future__ import annotations

from typing import Any

from flask import Response, request

import wirejson
from errors import InvalidArgument


def payload_too_large(limit: int) -> InvalidArgument:
    return InvalidArgument(f"Request payload size exceeds the limit: {limit} bytes.")


def read_body(limit: int) -> bytes:
    """The request body, refusing (before reading it all) anything larger than `limit` bytes."""
    length = request.content_length
    if length is not None and length > limit:
        raise payload_too_large(limit)
    # Chunked bodies have no length: read one byte past the limit to tell.
    data = request.stream.read(limit + 1)
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
