"""Who is calling: a verified principal from a request's credentials, using google-auth.

Accepted, in this order (`Authorization: Bearer TOKEN` unless noted):
1. a static token from the IAM config, mapped to its principal (quick local use);
2. a JWT self-signed with the key of a service account registered in the IAM config: what
   google-auth's service-account credentials send with self-signed JWT access (`iss` = `sub` = the
   account; AIP-4111). Signature, `exp`, `iat` (and a lifetime of at most an hour) are checked,
   and the audience: `aud` must be https://ml.googleapis.com/, the emulator's own URL or a
   configured audience; a token with no `aud` must carry a `scope` claim with an ml v1 scope;
3. a Google-signed ID token (`iss` accounts.google.com; the Cloud Run invoker flow), checked
   against the configured certificates and ID-token audiences; the principal is its `email`;
4. the configured principal header, only when the IAM config names one.
No credentials at all is the anonymous caller (whom only `allUsers` bindings admit). Anything
presented but unverifiable is 401 UNAUTHENTICATED with Google's message and WWW-Authenticate.
"""

from __future__ import annotations

import hmac
import logging
from typing import TYPE_CHECKING, Any

from google.auth import exceptions as google_exceptions
from google.auth import jwt

from core.errors import Unauthenticated, Unavailable
from core.payloads import ANONYMOUS, Caller

if TYPE_CHECKING:
    from auth.config import IamConfig
    from core.settings import Settings

log = logging.getLogger("mlemu.auth")

ML_AUDIENCE = "https://ml.googleapis.com/"
#: The ml v1 discovery document's OAuth scopes: either admits a scoped self-signed JWT.
ML_SCOPES = frozenset({"https://www.googleapis.com/auth/cloud-platform",
                       "https://www.googleapis.com/auth/cloud-platform.read-only"})
#: Leeway for clocks that disagree, on `iat` and `exp`.
CLOCK_SKEW_S = 10
#: Google refuses self-signed JWTs that live longer than an hour (google-auth makes 3600 s ones).
MAX_LIFETIME_S = 3600
_HELP = ("Expected OAuth 2 access token, login cookie or other valid authentication credential. "
         "See https://developers.google.com/identity/sign-in/web/devconsole-project.")
MISSING_MESSAGE = f"Request is missing required authentication credential. {_HELP}"
INVALID_MESSAGE = f"Request had invalid authentication credentials. {_HELP}"
_REALM = 'Bearer realm="https://accounts.google.com/"'


def _error(message: str, reason: str, header: str) -> Unauthenticated:
    detail = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
              "domain": "googleapis.com", "metadata": {"service": "ml.googleapis.com"}}
    return Unauthenticated(message, details=[detail], headers={"WWW-Authenticate": header})


def missing_credentials() -> Unauthenticated:
    return _error(MISSING_MESSAGE, "CREDENTIALS_MISSING", _REALM)


def invalid_credentials(why: str, reason: str = "ACCESS_TOKEN_TYPE_UNSUPPORTED") -> Unauthenticated:
    log.info("rejected credentials: %s", why)  # the reason goes to the log, never to the caller
    return _error(INVALID_MESSAGE, reason, f'{_REALM}, error="invalid_token"')


def _variants(url: str) -> set[str]:
    base = url.rstrip("/")
    return {base, base + "/"}


def own_audiences(settings: Settings, config: IamConfig) -> frozenset[str]:
    """https://ml.googleapis.com/, the emulator's URL(s) and the configured audiences."""
    found = _variants(ML_AUDIENCE)
    if settings.public_url:
        found |= _variants(settings.public_url)
    hosts = {settings.host}
    if settings.host in ("0.0.0.0", "::", "127.0.0.1", "localhost"):
        hosts |= {"127.0.0.1", "localhost"}
    for host in hosts - {"0.0.0.0", "::"}:
        found |= _variants(f"http://{host}:{settings.port}")
    for audience in config.audiences:
        found |= _variants(audience)
    return frozenset(found)


def identify(settings: Settings, config: IamConfig, headers: Any) -> Caller:
    authorization = headers.get("Authorization")
    if authorization:
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise invalid_credentials(f"unsupported Authorization scheme {scheme!r}")
        return verify_token(settings, config, token.strip())
    if config.principal_header:
        value = headers.get(config.principal_header)
        if value:
            return Caller(principal_from_header(value), authenticated=True)
    return ANONYMOUS


def principal_from_header(value: str) -> str:
    """`user:x` / `serviceAccount:x`, a bare email, or IAP's `accounts.google.com:EMAIL`."""
    value = value.strip().removeprefix("accounts.google.com:")
    if value.startswith(("user:", "serviceAccount:")) and "@" in value:
        return value
    if "@" in value and ":" not in value:
        return ("serviceAccount:" if value.endswith(".gserviceaccount.com") else "user:") + value
    raise invalid_credentials(f"principal header {value!r} is not user:EMAIL or serviceAccount:EMAIL")


def verify_token(settings: Settings, config: IamConfig, token: str) -> Caller:
    for known, principal in config.static_tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            return Caller(principal, authenticated=True)
    if token.count(".") != 2:
        raise invalid_credentials("not a JWT (opaque access tokens cannot be verified locally)")
    cached = config.verified.get(token)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    try:
        claims = jwt.decode(token, verify=False)
        issuer = str(claims.get("iss") or "")
        caller = None
        if issuer.lower() in config.service_accounts:
            caller = _self_signed(settings, config, token, issuer)
        elif config.id_tokens is not None and issuer in config.id_tokens.issuers:
            caller = _id_token(settings, config, token)
        if caller is not None:
            config.verified.put(token, caller, float(claims["exp"]) + CLOCK_SKEW_S)
            return caller
    except (google_exceptions.GoogleAuthError, ValueError, TypeError, KeyError) as exc:
        reason = "ACCESS_TOKEN_EXPIRED" if "expired" in str(exc).lower() else \
            "ACCESS_TOKEN_TYPE_UNSUPPORTED"
        raise invalid_credentials(str(exc), reason) from None
    raise invalid_credentials(f"no registered service account or ID-token issuer {issuer!r}")


def _self_signed(settings: Settings, config: IamConfig, token: str, issuer: str) -> Caller:
    certs = config.service_accounts[issuer.lower()]
    kid = jwt.decode_header(token).get("kid")
    candidates = [certs[kid]] if kid in certs else list(certs.values())
    claims = jwt.decode(token, certs=candidates, clock_skew_in_seconds=CLOCK_SKEW_S)
    if claims.get("sub") not in (None, issuer):
        raise ValueError(f"sub {claims.get('sub')!r} differs from iss {issuer!r}")
    if int(claims["exp"]) - int(claims["iat"]) > MAX_LIFETIME_S + CLOCK_SKEW_S:
        raise ValueError("token lifetime is longer than an hour")
    audience = claims.get("aud")
    if audience is not None:
        if audience not in own_audiences(settings, config):
            raise ValueError(f"wrong audience {audience!r}")
    elif not ML_SCOPES & set(str(claims.get("scope") or "").split()):
        raise ValueError("neither an accepted aud nor an ml v1 scope")
    return Caller(f"serviceAccount:{issuer}", authenticated=True)


def _id_token(settings: Settings, config: IamConfig, token: str) -> Caller:
    assert config.id_tokens is not None
    source = config.id_tokens.certs
    if isinstance(source, dict):
        certs = source
    else:
        try:
            certs = source.get()
        except Exception as exc:  # noqa: BLE001 - network, HTTP, JSON: the server's problem
            log.warning("cannot fetch ID token certificates from %s: %s", source.url, exc)
            raise Unavailable("The ID token certificates could not be fetched; try again later.") \
                from None
    audiences = set(own_audiences(settings, config))
    for audience in config.id_tokens.audiences:
        audiences |= _variants(audience)
    claims = jwt.decode(token, certs=certs, audience=sorted(audiences),
                        clock_skew_in_seconds=CLOCK_SKEW_S)
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email or claims.get("email_verified") is False:
        raise ValueError("an ID token without a verified email")
    kind = "serviceAccount" if email.endswith(".gserviceaccount.com") else "user"
    return Caller(f"{kind}:{email}", authenticated=True)
