"""Who is using the console, and the checks every console request passes.

With IAM off the console acts as the anonymous caller, as the APIs do. With IAM `enforce` it
needs a credential the APIs accept (README "IAM": a static token, a self-signed service-account
JWT, an ID token): the user gives it once on the sign-in page and it is kept in a cookie the page's
scripts cannot read (`HttpOnly`) and the browser sends only with the console's own requests
(`SameSite=Strict`, path `/console/`). Every console request verifies it again through
`auth.identify`, exactly as an API call carrying it as `Authorization: Bearer` would be, so
the console never grants more than the token's principal holds.

Forms that change state carry a CSRF token: the double-submit pattern (a random value in an
`HttpOnly`, `SameSite=Strict` cookie, repeated in a hidden form field, compared in constant time),
which needs no server-side secret shared by gunicorn's workers.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets

from flask import Request, current_app
from werkzeug.datastructures import Headers
from werkzeug.wrappers import Response

import auth
from core.errors import ApiError, PermissionDenied
from core.payloads import ANONYMOUS, Caller

TOKEN_COOKIE = "mlemu_console_token"  # noqa: S105 - a cookie name, not a secret
CSRF_COOKIE = "mlemu_console_csrf"
CSRF_FIELD = "csrf"
COOKIE_PATH = "/console/"
#: The longest credential kept (a self-signed JWT is ~1 KB; a cookie holds at most ~4 KB).
MAX_TOKEN_CHARS = 3800


class SignInNeeded(Exception):
    """IAM is enforced and this browser has no (valid) credential: show the sign-in page."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Visitor:
    """The console user of one request: the verified caller, the credential that proved it (sent
    on as `Authorization` when the console calls the APIs for them) and the CSRF value."""

    caller: Caller
    token: str | None
    csrf: str

    def api_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def enforced() -> bool:
    return auth.enforced(current_app.extensions["mlemu"])


def verify_token(token: str) -> Caller:
    """The caller `token` proves, as the APIs would verify it (an ApiError when it proves none)."""
    emu = current_app.extensions["mlemu"]
    return auth.identify(emu, Headers({"Authorization": f"Bearer {token}"}))


def visitor(request: Request) -> Visitor:
    """This request's console user; SignInNeeded when IAM is enforced without a valid token."""
    csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
    if not enforced():
        return Visitor(ANONYMOUS, None, csrf)
    token = request.cookies.get(TOKEN_COOKIE)
    if not token:
        raise SignInNeeded()
    try:
        caller = verify_token(token)
    except ApiError as exc:  # expired or revoked since sign-in
        raise SignInNeeded(exc.message) from None
    return Visitor(caller, token, csrf)


def check_csrf(request: Request) -> None:
    """Refuse a state-changing form whose hidden field does not repeat the CSRF cookie."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    field = request.form.get(CSRF_FIELD, "")
    if not cookie or not field or not hmac.compare_digest(cookie.encode(), field.encode()):
        raise PermissionDenied("The form's CSRF token is missing or does not match this browser's; "
                               "reload the page and send the form again.")


def _cookie(response: Response, request: Request, name: str, value: str,
            max_age: int | None = None) -> None:
    response.set_cookie(name, value, max_age=max_age, path=COOKIE_PATH, httponly=True,
                        samesite="Strict", secure=request.is_secure)


def keep_csrf(response: Response, request: Request, csrf: str) -> None:
    """Set the CSRF cookie when the browser does not hold this value yet."""
    if request.cookies.get(CSRF_COOKIE) != csrf:
        _cookie(response, request, CSRF_COOKIE, csrf)


def sign_in(response: Response, request: Request, token: str) -> None:
    # A session cookie (no Max-Age): it goes when the browser closes; the token's own expiry
    # (a JWT's `exp`) still applies at each request.
    _cookie(response, request, TOKEN_COOKIE, token)


def sign_out(response: Response, request: Request) -> None:
    response.delete_cookie(TOKEN_COOKIE, path=COOKIE_PATH, httponly=True, samesite="Strict",
                           secure=request.is_secure)
