"""Vertex AI `endpoints.predict` served in front of Flask, as protocols/aiplatform.py's
PredictFastPath serves ml v1's `:predict`: the same steps as the Flask view
(protocols/vertex_prediction.py: identify the caller, admit, bounded body, decode,
dataplane/vertex.py, the Google error object) without Flask's per-request machinery, so a
one-row endpoint prediction costs what an ml v1 one does.

A request qualifies when it is a POST with a Content-Length to `.../endpoints/{e}:predict` (names
of [A-Za-z0-9_-]) with no query string other than what the SDK's REST transport sends
(`$alt=json;enum-encoding=int`) or `alt=json`; anything else goes to Flask unchanged.
tests/api/test_vertex_fastpath.py checks both answer alike, byte for byte.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from time import perf_counter
from typing import TYPE_CHECKING, Any

from werkzeug.datastructures import EnvironHeaders

import auth
from core.errors import ApiError
from dataplane import vertex as vertex_dataplane
from observability.http import StartSeen
from protocols.aiplatform import encode_predictions
from protocols.vertex import decode_vertex_predict
from web.google import google_error_response, google_json
from web.handlers import render_internal
from web.http import decode_json, read_limited

if TYPE_CHECKING:
    from emulator import Emulator
    from observability.http import ObservedApp
    from protocols.aiplatform import StartResponse, WSGIApp

log = logging.getLogger("mlemu.vertex")
_PATH = re.compile(r"/v1/(projects/[\w-]+/locations/[\w-]+/endpoints/[\w-]+):predict", re.ASCII)
_QUERIES = ("", "alt=json", "%24alt=json%3Benum-encoding%3Dint", "$alt=json;enum-encoding=int")
_JSON_HEADERS = ("Content-Type", "application/json")
#: observability/http.py's `classify` labels these paths so too.
_KIND = ("aiplatform", "predict")


class VertexPredictFastPath:
    def __init__(self, app: WSGIApp, emu: Emulator, observed: ObservedApp | None = None) -> None:
        self.app = app
        self.emu = emu
        self.observed = observed
        # As PredictFastPath: in a Vertex AI container, AIP_PREDICT_ROUTE may be any path.
        self.enabled = emu.settings.vertex is None

    def route(self, environ: dict[str, Any]) -> str | None:
        """The endpoint a fast-path request addresses, or None if Flask should serve it."""
        if not self.enabled or environ.get("REQUEST_METHOD") != "POST" \
                or environ.get("QUERY_STRING", "") not in _QUERIES:
            return None
        if not str(environ.get("CONTENT_LENGTH", "")).isdigit():
            return None
        match = _PATH.fullmatch(environ.get("PATH_INFO", ""))
        return None if match is None else match.group(1)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        endpoint = self.route(environ)
        if endpoint is None:
            return self.app(environ, start_response)
        observed = self.observed
        if observed is None:
            return self._respond(environ, endpoint, start_response)[0]
        if observed.body_limit is not None and observed.body_limit():
            return self.app(environ, start_response)  # the journal keeps bodies: Flask's path
        started = perf_counter()
        ctx, token = observed.begin(environ, _KIND)
        code, headers = "500", None
        try:
            body, code, headers = self._respond(environ, endpoint, start_response)
            return body
        finally:
            observed.end(environ, ctx, token, _KIND, code, headers, started)

    def _respond(self, environ: dict[str, Any], endpoint: str, start_response: StartResponse
                 ) -> tuple[Iterable[bytes], str, list[tuple[str, str]] | None]:
        try:
            answer = self._serve(environ, endpoint)
        except ApiError as exc:
            return _started(google_error_response(exc), environ, start_response)
        except Exception:  # noqa: BLE001 - the client gets the Google INTERNAL error object
            return _started(render_internal(google_error_response, log), environ,
                            start_response)
        headers = [_JSON_HEADERS, ("Content-Length", str(len(answer)))]
        start_response("200 OK", headers)
        return [answer], "200", headers

    def _serve(self, environ: dict[str, Any], endpoint: str) -> bytes:
        emu = self.emu
        caller = auth.identify(emu, EnvironHeaders(environ))
        vertex_dataplane.admit(emu, caller, endpoint)
        data = read_limited(environ["wsgi.input"], int(environ["CONTENT_LENGTH"]),
                            emu.settings.max_request_bytes)
        req = decode_vertex_predict(decode_json(data))
        target, result = vertex_dataplane.predict(emu, caller, endpoint, req)
        return google_json({"predictions": encode_predictions(result.predictions),
                            **vertex_dataplane.identity(target)}, pretty=False)


def _started(response: WSGIApp, environ: dict[str, Any], start_response: StartResponse
             ) -> tuple[Iterable[bytes], str, list[tuple[str, str]] | None]:
    seen = StartSeen(start_response)
    body = response(environ, seen)
    return body, seen.code, seen.headers
