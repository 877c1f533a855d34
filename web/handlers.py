"""One error-handler registration for every protocol blueprint.

Each protocol renders an ApiError in its own shape (the Google error object, `{"error": "..."}`,
grps's status message); everything else about a blueprint's errors is the same and lives here:
an ApiError goes to the protocol's renderer; an HTTPException (404, 405, 413 raised by Flask or
werkzeug) goes back to the app's fallbacks (api.register_fallbacks), which choose the shape by
path; any other exception is logged with its traceback and answered as that protocol's INTERNAL
error, so no stack trace or server path reaches a client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Blueprint, Response, current_app
from werkzeug.exceptions import HTTPException

from errors import ApiError, Internal

#: A protocol's error shape: the response for an ApiError.
Renderer = Callable[[ApiError], Response]


def render_internal(render: Renderer, log: logging.Logger) -> Response:
    """The answer to an unexpected exception: logged with its traceback (call from an except
    block or error handler), never sent; the client gets `render`'s INTERNAL error."""
    log.exception("request failed unexpectedly")
    return render(Internal("Internal error encountered."))


def register_error_renderer(bp: Blueprint, render: Renderer, log: logging.Logger) -> None:
    """Answer `bp`'s errors in the shape `render` gives (see the module docstring)."""
    def api_error(exc: ApiError) -> Response:
        return render(exc)

    def unexpected(exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return current_app.handle_http_exception(exc)  # type: ignore[return-value]
        return render_internal(render, log)

    bp.register_error_handler(ApiError, api_error)
    bp.register_error_handler(Exception, unexpected)
