"""Vertex AI `endpoints.predict` served in front of Flask, as protocols/aiplatform.py's
PredictFastPath serves ml v1's `:predict` (both are protocols/fastpath.py FastPaths): the same
steps as the Flask view (protocols/vertex_prediction.py: identify the caller, admit, bounded body, decode,
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
from typing import Any

from werkzeug.datastructures import EnvironHeaders

import auth
from core.errors import ApiError
from dataplane import vertex as vertex_dataplane
from protocols.aiplatform import encode_predictions
from protocols.fastpath import FastPath, WSGIApp
from protocols.vertex import decode_vertex_predict
from web.google import google_error_response, google_json
from web.http import decode_json, read_limited

log = logging.getLogger("mlemu.vertex")
_PATH = re.compile(r"/v1/(projects/[\w-]+/locations/[\w-]+/endpoints/[\w-]+):predict", re.ASCII)
_QUERIES = ("", "alt=json", "%24alt=json%3Benum-encoding%3Dint", "$alt=json;enum-encoding=int")


class VertexPredictFastPath(FastPath[str]):
    """Vertex AI `endpoints.predict` in front of Flask (the module docstring says which)."""

    log = log

    def route(self, environ: dict[str, Any]) -> str | None:
        """The endpoint a fast-path request addresses, or None if Flask should serve it."""
        if not self.enabled or environ.get("REQUEST_METHOD") != "POST" \
                or environ.get("QUERY_STRING", "") not in _QUERIES:
            return None
        if not str(environ.get("CONTENT_LENGTH", "")).isdigit():
            return None
        match = _PATH.fullmatch(environ.get("PATH_INFO", ""))
        return None if match is None else match.group(1)

    def serve(self, environ: dict[str, Any], target: str) -> bytes:
        emu = self.emu
        caller = auth.identify(emu, EnvironHeaders(environ))
        vertex_dataplane.admit(emu, caller, target)
        data = read_limited(environ["wsgi.input"], int(environ["CONTENT_LENGTH"]),
                            emu.settings.max_request_bytes)
        req = decode_vertex_predict(decode_json(data))
        result_target, result = vertex_dataplane.predict(emu, caller, target, req)
        return google_json({"predictions": encode_predictions(result.predictions),
                            **vertex_dataplane.identity(result_target)}, pretty=False)

    def render_error(self, exc: ApiError) -> WSGIApp:
        return google_error_response(exc)  # type: ignore[no-any-return]
