"""The per-request context: what logs and metrics say about the request being served.

The HTTP middleware and the gRPC handlers' wrapper open one `RequestContext` per request (trace ids
from `X-Cloud-Trace-Context` or W3C `traceparent`); `dataplane.resolve` fills in the model and
version the request reached (names the registry knows, so label values stay bounded) and the
caller. A context variable carries it, so each gunicorn thread, gRPC pool thread and gRPC call
run on the event loop (an asyncio task of its own) sees its own.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Mapping

__all__ = ["RequestContext", "current", "parse_trace"]


class RequestContext:
    """What is known about one request. The defaults are class attributes, so a request with
    no trace headers costs one bare object (this is on every request's path)."""

    trace_id = ""
    span_id = ""
    sampled = False
    model = ""
    version = ""
    caller = ""
    #: What the controls (fault rules, the request journal) call the request: the protocol and
    #: its method id (docs/controls.md), set where the request enters; the project, endpoint and
    #: deployed model it reached; how many instances it carried (-1: not a prediction).
    protocol = ""
    method = ""
    project = ""
    endpoint = ""
    deployed_model = ""
    instances = -1

    @classmethod
    def traced(cls, trace_id: str, span_id: str, sampled: bool) -> RequestContext:
        ctx = cls()
        ctx.trace_id, ctx.span_id, ctx.sampled = trace_id, span_id, sampled
        return ctx


#: The HTTP middleware uses the variable itself (set/reset), on every request.
CURRENT: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "mlemu_request", default=None)


def current() -> RequestContext | None:
    return CURRENT.get()


def enter(ctx: RequestContext) -> contextvars.Token[RequestContext | None]:
    return CURRENT.set(ctx)


def leave(token: contextvars.Token[RequestContext | None]) -> None:
    CURRENT.reset(token)


def set_target(model: str, version: str, caller: str | None, project: str = "") -> None:
    """Record the model and version a request is served by (called once resolved)."""
    ctx = CURRENT.get()
    if ctx is not None:
        ctx.model, ctx.version, ctx.caller = model, version, caller or ""
        ctx.project = project


def set_method(protocol: str, method: str) -> None:
    """Name the request for the controls (an adapter that knows its method id better than the
    path does: ml v1 management methods)."""
    ctx = CURRENT.get()
    if ctx is not None:
        ctx.protocol, ctx.method = protocol, method


def set_instances(count: int) -> None:
    ctx = CURRENT.get()
    if ctx is not None:
        ctx.instances = count


# X-Cloud-Trace-Context: TRACE_ID[/SPAN_ID][;o=OPTIONS]; SPAN_ID is decimal there
# (https://cloud.google.com/trace/docs/trace-context#legacy-http-header).
_CLOUD = re.compile(r"([0-9a-fA-F]{32})(?:/(\d{1,20}))?(?:;o=([01]))?")
# traceparent: VERSION-TRACE_ID-PARENT_ID-FLAGS, hex (https://www.w3.org/TR/trace-context/).
_W3C = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def parse_trace(headers: Mapping[str, str]) -> RequestContext:
    """A context with the trace of `headers` (lower-case names); W3C wins when both are valid.

    Cloud Logging's `spanId` is 16 hex digits: the W3C parent id as is, the legacy header's
    decimal span id converted.
    """
    parent = headers.get("traceparent")
    if parent:
        m = _W3C.fullmatch(parent.strip())
        if m and m.group(1) != "ff" and m.group(2) != "0" * 32 and m.group(3) != "0" * 16:
            return RequestContext.traced(m.group(2), m.group(3), bool(int(m.group(4), 16) & 1))
    cloud = headers.get("x-cloud-trace-context")
    if cloud:
        m = _CLOUD.match(cloud.strip())
        if m:
            span = f"{int(m.group(2)) & (2**64 - 1):016x}" if m.group(2) else ""
            return RequestContext.traced(m.group(1).lower(), span, m.group(3) == "1")
    return RequestContext()


#: (model, version) whose code is running in this thread: a model call or load. Lines that
#: predictor code prints or logs are attributed to it (logs.py).
#: instrument.py uses the variable itself (get/set/reset), on every model call.
PREDICTOR: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "mlemu_predictor", default=None)


def predictor() -> tuple[str, str] | None:
    return PREDICTOR.get()
