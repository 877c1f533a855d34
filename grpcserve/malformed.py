"""Request messages that do not parse: answered INVALID_ARGUMENT by the method they were sent to.

grpc.aio parses a request with the method's deserializer before any handler runs; when that
raises (protobuf's DecodeError for bytes that are not the message), grpc.aio ends the call
UNKNOWN with "Unexpected <class '...DecodeError'>" and logs a traceback per call, and no
handler sees it, so neither metrics nor the access log do. Here the deserializer never raises:
it hands the handler a `Malformed` placeholder, and the handler (observed like any other call)
refuses it with INVALID_ARGUMENT naming the message type the method takes, logging one line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import grpc

log = logging.getLogger("mlemu.grpc")

Deserializer = Callable[[bytes], Any]


class Malformed:
    """Stands for a request message that did not parse (what the dispatcher reads of a request
    answers as for an empty message: no model fields, no size)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def ByteSize(self) -> int:  # protobuf's name: grpcserve/dispatch.py reads it
        return 0


def tolerant(deserialize: Deserializer | None) -> Deserializer | None:
    """`deserialize`, answering `Malformed` where it would raise."""
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception:  # noqa: BLE001 - DecodeError, or any parser's own failure
            return Malformed(len(data))
    return parse


def _refusal(message_type: str) -> str:
    return f"Failed to parse the request: it is not a valid {message_type} message."


def refuse(request: Malformed, context: Any, method: str, message_type: str) -> None:
    """End the call INVALID_ARGUMENT (`context.abort` raises)."""
    log.warning("%s: %d-byte request is not a valid %s message", method, request.size,
                message_type)
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, _refusal(message_type))


def unary(behavior: Callable[[Any, Any], Any], method: str,
          message_type: str) -> Callable[[Any, Any], Any]:
    """A unary `behavior` that refuses a `Malformed` request before it runs."""
    def checked(request: Any, context: Any) -> Any:
        if isinstance(request, Malformed):
            refuse(request, context, method, message_type)
        return behavior(request, context)
    return checked


def stream(behavior: Callable[[Any, Any], Iterator[Any]], method: str,
           message_type: str) -> Callable[[Any, Any], Iterator[Any]]:
    """A response-streaming `behavior` that refuses a `Malformed` request before it runs."""
    def checked(request: Any, context: Any) -> Iterator[Any]:
        if isinstance(request, Malformed):
            refuse(request, context, method, message_type)
        yield from behavior(request, context)
    return checked
