"""gRPC server interceptor: the HTTP middleware's metrics and trace context for V2 and grps.

The gRPC server is grpc.aio's, running the synchronous servicers in its thread pool
(grpc_server.py); this interceptor wraps each servicer method in a synchronous function that
runs in that pool thread too, so the request context it opens is the one `dataplane.resolve`
fills. Protocol comes from the service (`inference.GRPCInferenceService` -> v2,
`grps.protos.v1.GrpsService` -> grps), method is the RPC's own name, the code is the gRPC status
name the servicer set (`abort` or `set_code`, seen through a recording context), else OK.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
import grpc.aio

from observability import context
from observability.metrics import Instruments

_SERVICES = {"inference.GRPCInferenceService": "v2", "grps.protos.v1.GrpsService": "grps"}


class _RecordingContext:
    """The servicer context, remembering the status code the servicer sets."""

    def __init__(self, servicer_context: Any) -> None:
        self._context = servicer_context
        self.code: grpc.StatusCode | None = None

    def abort(self, code: grpc.StatusCode, details: str = "") -> Any:
        self.code = code
        return self._context.abort(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code
        self._context.set_code(code)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def status(self, failed: bool) -> str:
        if isinstance(self.code, grpc.StatusCode):
            return str(self.code.name)
        return "UNKNOWN" if failed else "OK"


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Opens each call's request context (trace for logs) and, with metrics on, counts it."""

    def __init__(self, instruments: Instruments | None) -> None:
        self.instruments = instruments

    async def intercept_service(
            self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
            details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None:
            return None
        service, _, method = details.method.lstrip("/").partition("/")  # type: ignore[attr-defined]
        protocol = _SERVICES.get(service, "other")
        method = method if protocol != "other" else "other"
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, protocol, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream, protocol, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler

    def _record(self, protocol: str, method: str, ctx: context.RequestContext,
                recording: _RecordingContext, failed: bool, started: float) -> None:
        if self.instruments is not None:
            self.instruments.request("grpc", protocol, method, ctx.model, ctx.version,
                                     recording.status(failed), time.perf_counter() - started)

    @staticmethod
    def _enter(servicer_context: Any) -> context.RequestContext:
        metadata = {k.lower(): v for k, v in servicer_context.invocation_metadata() or ()
                    if isinstance(v, str)}
        return context.parse_trace(metadata)

    def _unary(self, behavior: Callable[[Any, Any], Any], protocol: str,
               method: str) -> Callable[[Any, Any], Any]:
        def observed(request: Any, servicer_context: Any) -> Any:
            ctx = self._enter(servicer_context)
            recording = _RecordingContext(servicer_context)
            token = context.CURRENT.set(ctx)
            started, failed = time.perf_counter(), True
            try:
                answer = behavior(request, recording)
                failed = False
                return answer
            finally:
                self._record(protocol, method, ctx, recording, failed, started)
                context.CURRENT.reset(token)
        return observed

    def _stream(self, behavior: Callable[[Any, Any], Iterator[Any]], protocol: str,
                method: str) -> Callable[[Any, Any], Iterator[Any]]:
        def observed(request: Any, servicer_context: Any) -> Iterator[Any]:
            ctx = self._enter(servicer_context)
            recording = _RecordingContext(servicer_context)
            token = context.CURRENT.set(ctx)
            started, failed = time.perf_counter(), True
            try:
                yield from behavior(request, recording)
                failed = False
            finally:
                self._record(protocol, method, ctx, recording, failed, started)
                context.CURRENT.reset(token)
        return observed
