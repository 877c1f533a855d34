"""The console's Flask plumbing shared by its page modules: its per-app state, the visitor of the
request, rendering with the CSRF cookie, and calls to mlemu's own APIs for the visitor.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import TYPE_CHECKING, Any

from flask import Response, current_app, g, render_template, request

from console import session
from console.controls_client import ControlsClient
from console.loopback import Answer, call
from console.metrics_data import History, Sample
from observability import exposition

if TYPE_CHECKING:
    from emulator import Emulator

STATE_KEY = "mlemu_console"


@dataclasses.dataclass
class ConsoleState:
    """What the console keeps per app (never in module globals): its metric samples."""

    history: History = dataclasses.field(default_factory=History)


def state() -> ConsoleState:
    found: ConsoleState = current_app.extensions[STATE_KEY]
    return found


def emulator() -> Emulator:
    found: Emulator = current_app.extensions["mlemu"]
    return found


def visitor() -> session.Visitor:
    """This request's console user (computed once; SignInNeeded goes to the sign-in page)."""
    found = g.get("console_visitor")
    if found is None:
        found = g.console_visitor = session.visitor(request)
    return found  # type: ignore[no-any-return]


def page(template: str, status: int = 200, **context: Any) -> Response:
    """A rendered page; it (re)sets the CSRF cookie its forms' hidden fields repeat."""
    who = g.get("console_visitor")
    csrf = who.csrf if who is not None else (request.cookies.get(session.CSRF_COOKIE)
                                              or secrets.token_urlsafe(24))
    body = render_template(template, csrf=csrf, csrf_field=session.CSRF_FIELD,
                           enforced=session.enforced(), who=who, **context)
    response = Response(body, status, content_type="text/html; charset=utf-8")
    session.keep_csrf(response, request, csrf)
    # The console's pages are the emulator's state for one user: never cache or frame them.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'")
    return response


def api(method: str, path: str, body: bytes | None = None) -> Answer:
    """mlemu's own API answering `method path` for the console user."""
    return call(current_app.wsgi_app, method, path, headers=visitor().api_headers(), body=body)


def controls() -> ControlsClient:
    return ControlsClient(current_app.wsgi_app, visitor().api_headers(),
                          [rule.rule for rule in current_app.url_map.iter_rules()])


def metrics_sample() -> Sample | None:
    """The newest metrics sample (a new one when the last is older than the history's interval);
    None when metrics are off."""
    instruments = emulator().instruments
    if instruments is None:
        return None
    return state().history.take(
        lambda: exposition.render(instruments, None)[0].decode("utf-8", "replace"))
