"""WSGI middleware in front of every HTTP protocol: request metrics and the access log.

It wraps the whole app but the :predict fast path (protocols/aiplatform.PredictFastPath), which
sits in front of it and records its own requests through the same `begin`/`end`, so each
request is counted once whichever protocol served it. Protocol and method come from the path
through a fixed table (a bounded label set; `classify`); model and version from what
`dataplane.resolve` recorded in the request context (empty when the request never reached a
known version). The access log entry is Cloud Logging's `httpRequest` (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#HttpRequest).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from time import perf_counter, time
from typing import Any

from observability import context
from observability.bodies import Captured, TeeInput
from observability.context import CURRENT, RequestContext
from observability.metrics import Instruments

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
#: Where each finished request goes for the request journal (controls.Controls.record):
#: (context, transport, path, status, wall-clock start, seconds, (request, response) bodies).
Journal = Callable[[RequestContext, str, str, str, float, float, "tuple[bytes, bytes] | None"],
                   None]

access_log = logging.getLogger("mlemu.access")

_TFS_VERBS = {":predict": "predict", ":classify": "classify", ":regress": "regress"}
#: grps's REST routes (protocols/grps.py), by group: the only method labels its paths give.
_GRPS_METHODS = {"health": ("online", "offline", "live", "ready"), "infer": ("predict",),
                 "metadata": ("server", "model")}


def control_names(kind: tuple[str, str]) -> tuple[str, str]:
    """(protocol, method) as fault rules and the journal name a request (docs/controls.md); ml v1
    management methods get their method id from their blueprint (api/controls_hook.py)."""
    protocol, method = kind
    if protocol == "ml_v1":
        return "aiplatform", ""
    if protocol == "grps" and method.startswith("infer."):
        return "grps", method[6:]
    return kind


def classify(path: str, verb: str, vertex_routes: dict[str, str]) -> tuple[str, str]:
    """(protocol, method) of a request path: labels from a fixed set, never from names in it."""
    if path in vertex_routes:
        return "vertex", vertex_routes[path]
    if path.startswith("/v1/projects/"):
        if path.endswith(":predict"):
            return "aiplatform", "predict"
        if path.endswith(":explain"):
            return "aiplatform", "explain"
        return "ml_v1", verb if verb in ("GET", "POST", "PATCH", "DELETE") else "other"
    if path.startswith("/v1/models"):
        for suffix, method in _TFS_VERBS.items():
            if path.endswith(suffix):
                return "tfserving", method
        return "tfserving", "metadata" if path.endswith("/metadata") else "status"
    if path.startswith("/v2"):
        if path.endswith("/infer"):
            return "v2", "infer"
        if path.endswith("/ready") or path.startswith("/v2/health/"):
            return "v2", "health"
        return "v2", "metadata"
    if path.startswith("/grps/v1/"):
        # Only a route grps has names a method: any other segment (an anonymous 404 included)
        # is "other", so no path can add a label value.
        parts = path.split("/")
        if len(parts) == 5 and parts[4] in _GRPS_METHODS.get(parts[3], ()):
            return "grps", f"{parts[3]}.{parts[4]}"
        return "grps", "other"
    if path in ("/healthz", "/readyz"):
        return "health", path[1:]
    if path == "/metrics":
        return "metrics", "scrape"
    if path == "/":
        return "grps", "monitor"
    return "other", "other"


class StartSeen:
    """A WSGI `start_response` that notes the status code and headers it passes on ("500" and
    None until it is called)."""

    __slots__ = ("code", "headers", "start_response")

    def __init__(self, start_response: StartResponse) -> None:
        self.start_response = start_response
        self.code = "500"
        self.headers: list[tuple[str, str]] | None = None

    def __call__(self, status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
        self.code, self.headers = status[:3], headers
        return self.start_response(status, headers, *exc)


class ObservedApp:
    """Counts and times every request, and writes its access log entry when asked to. A
    streamed answer (grps `streaming=true`) is timed until its iterable is returned, before its
    chunks are sent; its size is absent from the access log (no Content-Length)."""

    def __init__(self, app: WSGIApp, instruments: Instruments | None, *, access: bool,
                 vertex_routes: dict[str, str], journal: Journal | None = None,
                 body_limit: Callable[[], int] | None = None) -> None:
        self.app = app
        self.instruments = instruments
        self.access = access
        self.vertex_routes = vertex_routes
        self.journal = journal
        #: Bytes of each body the journal keeps (0: none; asked per request, cheaply).
        self.body_limit = body_limit

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = perf_counter()
        kind = classify(environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", ""),
                        self.vertex_routes)
        ctx, token = self.begin(environ, kind)
        seen = StartSeen(start_response)
        limit = self.body_limit() if self.body_limit is not None else 0
        if limit:
            environ["wsgi.input"] = TeeInput(environ["wsgi.input"], limit)
        try:
            answer = self.app(environ, seen)
            if limit:  # the journal entry waits for the response's bytes
                return Captured(answer, limit, lambda body: self._journal(
                    environ, ctx, seen.code, started, (environ["wsgi.input"].seen(), body)))
            return answer
        finally:
            self.end(environ, ctx, token, kind, seen.code, seen.headers, started,
                     journal=not limit)

    def begin(self, environ: dict[str, Any],
              kind: tuple[str, str] = ("other", "other")) -> tuple[RequestContext, Any]:
        """Open a request's context (its trace, if the headers carry one) for what runs next;
        `kind` is the request's (protocol, method) labels."""
        if "HTTP_TRACEPARENT" in environ or "HTTP_X_CLOUD_TRACE_CONTEXT" in environ:
            ctx = context.parse_trace({
                "traceparent": environ.get("HTTP_TRACEPARENT", ""),
                "x-cloud-trace-context": environ.get("HTTP_X_CLOUD_TRACE_CONTEXT", "")})
        else:
            ctx = RequestContext()
        ctx.protocol, ctx.method = control_names(kind)
        return ctx, CURRENT.set(ctx)

    def _journal(self, environ: dict[str, Any], ctx: RequestContext, code: str, started: float,
                 bodies: tuple[bytes, bytes] | None) -> None:
        if self.journal is not None:
            seconds = perf_counter() - started
            self.journal(ctx, "http", environ.get("PATH_INFO", ""), code, time() - seconds,
                         seconds, bodies)

    def end(self, environ: dict[str, Any], ctx: RequestContext, token: Any,
            kind: tuple[str, str], code: str, headers: list[tuple[str, str]] | None,
            started: float, *, journal: bool = True) -> None:
        """Count and log a request `begin` opened, as (protocol, method) `kind`; close its
        context. protocols/aiplatform.PredictFastPath calls begin and end itself, knowing its
        requests' kind and answer without the wrapping above."""
        seconds = perf_counter() - started
        try:
            if self.instruments is not None:
                self.instruments.request(("http", kind[0], kind[1], ctx.model, ctx.version, code),
                                         seconds)
            if self.access:
                self._access_log(environ, environ.get("PATH_INFO", ""),
                                 environ.get("REQUEST_METHOD", ""), code, headers, seconds)
            if journal and self.journal is not None:
                self.journal(ctx, "http", environ.get("PATH_INFO", ""), code, time() - seconds,
                             seconds, None)
        finally:
            CURRENT.reset(token)

    def _access_log(self, environ: dict[str, Any], path: str, verb: str, code: str,
                    headers: list[tuple[str, str]] | None, seconds: float) -> None:
        size = next((v for k, v in headers or () if k.lower() == "content-length"), None)
        query = environ.get("QUERY_STRING")
        url = f"{environ.get('wsgi.url_scheme', 'http')}://{environ.get('HTTP_HOST', '')}{path}"
        if query:
            url += f"?{query}"
        entry: dict[str, Any] = {
            "requestMethod": verb, "requestUrl": url, "status": int(code),
            "latency": f"{seconds:.6f}s", "protocol": environ.get("SERVER_PROTOCOL", ""),
            "remoteIp": environ.get("REMOTE_ADDR", ""),
        }
        if environ.get("CONTENT_LENGTH"):
            entry["requestSize"] = environ["CONTENT_LENGTH"]
        if size is not None:
            entry["responseSize"] = size
        if environ.get("HTTP_USER_AGENT"):
            entry["userAgent"] = environ["HTTP_USER_AGENT"]
        if environ.get("HTTP_REFERER"):
            entry["referer"] = environ["HTTP_REFERER"]
        access_log.info("%s %s %s %s %.1f ms", verb, url, code, size or "-", seconds * 1000,
                        extra={"httpRequest": entry})
