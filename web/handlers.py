"""One error-handler registration for every protocol blueprint.

Each protocol renders an ApiError in its own shape (the Google error object, `{"error": "..."}`,
grps's status message); everything else about a blueprint's errors is the same and lives here:
an ApiError goes to the protocol's renderer; an HTTPException that Flask or werkzeug raises inside
a view (413, 400 from a malformed body, an abort()) becomes the ApiError of its status and goes to
the same renderer (the app's fallbacks, api.register_fallbacks, render the same way for requests no
blueprint took: unknown routes, wrong methods); any other exception is logged with its traceback
and answered as that protocol's INTERNAL error, so no stack trace or server path reaches a client.

The HTTPException handler is registered for its own class on purpose: a blueprint handler for
`Exception` that handed HTTPExceptions back to `Flask.handle_http_exception` found itself again
(Flask looks up the blueprint's handlers first, by the exception's MRO) and recursed until
RecursionError, which ended as a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Blueprint, Response, request
from werkzeug.exceptions import HTTPException

from core.errors import ApiError, Code, Internal, from_code

#: A protocol's error shape: the response for an ApiError.
Renderer = Callable[[ApiError], Response]

_HTTP_TO_CODE = {400: Code.INVALID_ARGUMENT, 401: Code.UNAUTHENTICATED, 403: Code.PERMISSION_DENIED,
                 404: Code.NOT_FOUND, 405: Code.INVALID_ARGUMENT, 409: Code.ABORTED,
                 413: Code.INVALID_ARGUMENT, 415: Code.INVALID_ARGUMENT, 501: Code.UNIMPLEMENTED}


def render_http_exception(render: Renderer, exc: HTTPException) -> Response:
    """An HTTPException (raised by Flask or werkzeug) as the ApiError of its status, in `render`'s
    shape, with werkzeug's Allow header on a 405."""
    status = exc.code or 500
    if status == 404:
        message = f"The requested URL {request.path} was not found on this server."
    elif status == 405:
        allowed = ", ".join(sorted(getattr(exc, "valid_methods", None) or []))
        message = f"Method {request.method} is not allowed for {request.path}."
        if allowed:
            message += f" Allowed: {allowed}."
    else:
        message = exc.description or exc.name
    response = render(from_code(_HTTP_TO_CODE.get(status, Code.UNKNOWN), message, status))
    allow = getattr(exc, "valid_methods", None)
    if status == 405 and allow:
        response.headers["Allow"] = ", ".join(allow)
    return response


def render_internal(render: Renderer, log: logging.Logger) -> Response:
    """The answer to an unexpected exception: logged with its traceback (call from an except
    block or error handler), never sent; the client gets `render`'s INTERNAL error."""
    log.exception("request failed unexpectedly")
    return render(Internal("Internal error encountered."))


def register_error_renderer(bp: Blueprint, render: Renderer, log: logging.Logger) -> None:
    """Answer `bp`'s errors in the shape `render` gives (see the module docstring)."""
    def api_error(exc: ApiError) -> Response:
        return render(exc)

    def http_error(exc: HTTPException) -> Response:
        return render_http_exception(render, exc)

    def unexpected(exc: Exception) -> Response:
        return render_internal(render, log)

    bp.register_error_handler(ApiError, api_error)
    bp.register_error_handler(HTTPException, http_error)
    bp.register_error_handler(Exception, unexpected)
