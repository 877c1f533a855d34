"""The ml v1 management surface's blueprints, health probes, and app-level JSON fallbacks.

Unknown routes and wrong methods answer JSON, never HTML: the Google error object under
/v1/projects (where Google API clients parse it), `{"error": "..."}` everywhere else (the shape
TF Serving and V2 clients expect).
"""

from __future__ import annotations

import logging

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from core.errors import ApiError, Internal
from web.google import google_error_response
from web.handlers import render_http_exception
from web.http import error_json, request_caller

log = logging.getLogger("mlemu")

def _google_path() -> bool:
    return request.path.startswith(("/v1/projects", "/_mlemu/"))


def _render(exc: ApiError) -> Response:
    if _google_path():
        return google_error_response(exc)
    if request.path.startswith("/grps/"):  # grps clients read {"status": {...}}
        from protocols.grps import grps_error_response

        return grps_error_response(exc)
    return error_json(exc)


def is_health_probe(path: str) -> bool:
    """The routes IAM leaves open in every mode: liveness and readiness probes (grps's
    online/offline change the server's state: they need a permission, protocols/grps_state.py)."""
    return path in ("/healthz", "/readyz", "/grps/v1/health/live", "/grps/v1/health/ready") \
        or path.startswith("/v2/health/")


def register_authentication(app: Flask) -> None:
    """Verify every request's credentials first (health probes excepted), whatever the route:
    bad credentials are 401 before any other check, as at Google's front end. The caller is
    kept for the view (web.http.request_caller); IAM mode off skips the verification."""
    @app.before_request
    def _identify() -> None:
        if not is_health_probe(request.path):
            request_caller()


def register_fallbacks(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        return render_http_exception(_render, exc)

    @app.errorhandler(ApiError)
    def _api(exc: ApiError) -> Response:
        return _render(exc)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _render(Internal("Internal error encountered."))
