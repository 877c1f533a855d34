"""WSGI middleware in front of Flask that serves the most frequent prediction requests without
Flask's per-request machinery (request and app contexts, URL matching, Response objects, which
cost about as much GIL time as a small model's prediction). A subclass says which requests it
takes (`route`), how it serves one (`serve`: the same steps as its Flask view) and how its
errors look (`render_error`); everything else goes to Flask unchanged.

The observability middleware, when installed, is handed in (`observed`): the fast path counts and
logs its own requests through its begin/end, because it knows their kind and answer, so the
request users send most pays for no wrapper. While the request journal records bodies, requests
go to Flask, whose middleware records them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from core.errors import ApiError
from observability.http import StartSeen
from web.handlers import render_internal

if TYPE_CHECKING:
    from emulator import Emulator
    from observability.http import ObservedApp

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
T = TypeVar("T")
_JSON_HEADERS = ("Content-Type", "application/json")
#: (protocol, method) of every fast-path request (observability/http.py's `classify` says the same).
KIND = ("aiplatform", "predict")


class FastPath(Generic[T]):
    """Serves the requests `route` takes (`T`: what the path addresses), the rest through `app`."""

    #: Where unexpected errors are logged.
    log = logging.getLogger("mlemu")

    def __init__(self, app: WSGIApp, emu: Emulator, observed: ObservedApp | None = None) -> None:
        """`app` serves what the fast path does not; `observed`, the observability middleware
        around it (if installed), counts and logs the fast path's own requests too."""
        self.app = app
        self.emu = emu
        self.observed = observed
        # In a Vertex AI container, AIP_PREDICT_ROUTE may be any path: Flask routes everything.
        self.enabled = emu.settings.vertex is None

    def route(self, environ: dict[str, Any]) -> T | None:
        """What a request for the fast path addresses, or None if Flask should serve it."""
        raise NotImplementedError

    def serve(self, environ: dict[str, Any], target: T) -> bytes:
        """The 200 answer's body (an ApiError for any other answer)."""
        raise NotImplementedError

    def render_error(self, exc: ApiError) -> WSGIApp:
        """This route's error response for `exc`."""
        raise NotImplementedError

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        target = self.route(environ)
        if target is None:
            return self.app(environ, start_response)
        observed = self.observed
        if observed is None:
            return self._respond(environ, target, start_response)[0]
        if observed.body_limit is not None and observed.body_limit():
            return self.app(environ, start_response)  # the journal keeps bodies: Flask's path
        started = perf_counter()
        ctx, token = observed.begin(environ, KIND)
        code, headers = "500", None
        try:
            body, code, headers = self._respond(environ, target, start_response)
            return body
        finally:
            observed.end(environ, ctx, token, KIND, code, headers, started)

    def _respond(self, environ: dict[str, Any], target: T, start_response: StartResponse
                 ) -> tuple[Iterable[bytes], str, list[tuple[str, str]] | None]:
        """Serve one request: the body, and the status code and headers it started."""
        try:
            answer = self.serve(environ, target)
        except ApiError as exc:
            return _started(self.render_error(exc), environ, start_response)
        except Exception:  # noqa: BLE001 - the client gets this route's INTERNAL error object
            return _started(render_internal(self.render_error, self.log),  # type: ignore[arg-type]
                            environ, start_response)
        headers = [_JSON_HEADERS, ("Content-Length", str(len(answer)))]
        start_response("200 OK", headers)
        return [answer], "200", headers


def _started(response: WSGIApp, environ: dict[str, Any], start_response: StartResponse
             ) -> tuple[Iterable[bytes], str, list[tuple[str, str]] | None]:
    """Run an error response, noting the status code and headers it starts with."""
    seen = StartSeen(start_response)
    body = response(environ, seen)
    return body, seen.code, seen.headers
