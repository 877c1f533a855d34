"""gRPC handlers' observation: the HTTP middleware's metrics and trace context for V2 and grps.

grpcserve/server.py wraps each servicer method once, when it builds the server, in a function that
runs where the call runs (on the event loop or in a pool thread, grpcserve/dispatch.py), so the
request context it opens is the one `dataplane.resolve` fills. Protocol comes from the service
(`inference.GRPCInferenceService` -> v2, `grps.protos.v1.GrpsService` -> grps,
`google.cloud.aiplatform.v1.PredictionService` -> aiplatform), method is the RPC's own name, the
code is the gRPC status name the servicer set (`abort` or `set_code`, seen through a recording
context), else OK. (An interceptor did this before; grpc.aio runs interceptors per call,
coroutine and all, and this is the same work without them.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from observability import context
from observability.metrics import Instruments

_SERVICES = {"inference.GRPCInferenceService": "v2", "grps.protos.v1.GrpsService": "grps",
             "google.cloud.aiplatform.v1.PredictionService": "aiplatform"}
#: RPC name -> the method name the same call has over REST (observability/http.py
#: control_names), so one fault rule or journal filter covers both transports.
CONTROL_METHODS = {
    "v2": {"ModelInfer": "infer", "ModelMetadata": "metadata", "ServerMetadata": "metadata",
           "ModelReady": "health", "ServerLive": "health", "ServerReady": "health"},
    "grps": {"Predict": "predict", "PredictStreaming": "predict", "ModelMetadata": "metadata.model",
             "ServerMetadata": "metadata.server", "CheckLiveness": "health.live",
             "CheckReadiness": "health.ready", "Online": "health.online",
             "Offline": "health.offline"},
    # Vertex AI's PredictionService (protocols/vertex_grpc.py): its REST methods' names.
    "aiplatform": {"Predict": "predict", "RawPredict": "rawPredict", "Explain": "explain"},
}


def labels(service: str, method: str) -> tuple[str, str]:
    """(protocol, method) labels of a gRPC service's method (both "other" for services mlemu
    does not know, so labels stay bounded)."""
    protocol = _SERVICES.get(service, "other")
    return protocol, method if protocol != "other" else "other"


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


class Observer:
    """Opens each call's request context (trace for logs) and, with metrics on, counts it."""

    def __init__(self, instruments: Instruments | None,
                 journal: Callable[..., None] | None = None) -> None:
        self.instruments = instruments
        #: The request journal's recorder (observability/http.py `Journal`).
        self.journal = journal

    def _record(self, protocol: str, method: str, ctx: context.RequestContext,
                recording: _RecordingContext, failed: bool, started: float) -> None:
        seconds = time.perf_counter() - started
        status = recording.status(failed)
        if self.instruments is not None:
            self.instruments.request(("grpc", protocol, method, ctx.model, ctx.version, status),
                                     seconds)
        if self.journal is not None:
            self.journal(ctx, "grpc", f"/{protocol}/{method}", status, time.time() - seconds,
                         seconds, None)

    @staticmethod
    def _enter(servicer_context: Any, protocol: str, method: str) -> context.RequestContext:
        metadata = {k.lower(): v for k, v in servicer_context.invocation_metadata() or ()
                    if isinstance(v, str)}
        ctx = context.parse_trace(metadata)
        ctx.protocol = protocol
        ctx.method = CONTROL_METHODS.get(protocol, {}).get(method, method)
        return ctx

    def unary(self, behavior: Callable[[Any, Any], Any], service: str,
              method: str) -> Callable[[Any, Any], Any]:
        """`behavior` (a unary servicer method of `service`), observed."""
        protocol, method = labels(service, method)

        def observed(request: Any, servicer_context: Any) -> Any:
            ctx = self._enter(servicer_context, protocol, method)
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

    def stream(self, behavior: Callable[[Any, Any], Iterator[Any]], service: str,
               method: str) -> Callable[[Any, Any], Iterator[Any]]:
        """`behavior` (a servicer method of `service` streaming its answers), observed."""
        protocol, method = labels(service, method)

        def observed(request: Any, servicer_context: Any) -> Iterator[Any]:
            ctx = self._enter(servicer_context, protocol, method)
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
