"""Public keys that verify tokens: from service-account key files, certificate files, certificate
maps and JWK sets, and Google's ID-token certificates fetched from a URL (cached).

Everything becomes `key id -> PEM` (an X.509 certificate or a SubjectPublicKeyInfo public key),
which is what google.auth.jwt.decode takes as `certs`. Accepted inputs:
- a service-account key file (JSON, `type: service_account`): its private key's public half, with
  `private_key_id` as key id and `client_email` as the account (the key id is what google-auth
  puts in the JWT header's `kid`);
- a PEM file: one certificate or public key (key id from the config, else none);
- a JSON map `{key id: PEM certificate}`: the format of
  https://www.googleapis.com/robot/v1/metadata/x509/ACCOUNT and .../oauth2/v1/certs;
- a JWK set `{"keys": [{"kid", "kty": "RSA", "n", "e"}, ...]}` (.../oauth2/v3/certs).
"""

from __future__ import annotations

import base64
import collections
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

#: Certificates fetched from a URL are kept this long when the answer has no max-age.
DEFAULT_CERTS_TTL_S = 3600.0
_MAX_AGE = re.compile(r"max-age=(\d+)")


class KeyMaterialError(ValueError):
    """Key material that cannot be read (message names the file)."""


def _public_pem(private_pem: str) -> str:
    # cryptography is imported where keys are read, not when the server starts with IAM off.
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def _b64url_int(value: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)), "big")


def _jwk_pem(jwk: dict[str, Any]) -> str:
    if jwk.get("kty") != "RSA":
        raise ValueError(f"unsupported JWK key type {jwk.get('kty')!r} (RSA only)")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    numbers = rsa.RSAPublicNumbers(_b64url_int(jwk["e"]), _b64url_int(jwk["n"]))
    return numbers.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def _check_pem(pem: str) -> str:
    """Fail now, not on the first request, if a PEM cannot be used to verify."""
    from google.auth.crypt import RSAVerifier

    RSAVerifier.from_string(pem)
    return pem


def certs_from_json(data: Any) -> dict[str, str]:
    """`{kid: PEM}` from a certificate map or a JWK set."""
    if isinstance(data, dict) and isinstance(data.get("keys"), list):
        return {str(k.get("kid", i)): _jwk_pem(k) for i, k in enumerate(data["keys"])}
    if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
        return {str(kid): _check_pem(pem) for kid, pem in data.items()}
    raise ValueError("expected a {key id: PEM certificate} map or a JWK set {\"keys\": [...]}")


def load_key_file(path: Path) -> tuple[str, dict[str, str]]:
    """(client_email, {private_key_id: public PEM}) from a service-account key file."""
    try:
        info = json.loads(path.read_text())
        return str(info["client_email"]), {str(info.get("private_key_id") or ""):
                                           _public_pem(info["private_key"])}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KeyMaterialError(f"{path}: not a usable service-account key file ({exc})") from None


def load_cert_file(path: Path, key_id: str | None = None) -> dict[str, str]:
    """`{kid: PEM}` from a PEM file or a JSON certificate map / JWK set."""
    try:
        text = path.read_text()
        if text.lstrip().startswith("{"):
            return certs_from_json(json.loads(text))
        return {key_id or "": _check_pem(text)}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KeyMaterialError(f"{path}: no usable certificate or public key ({exc})") from None


class TokenCache:
    """Tokens already verified, until they expire: google-auth reuses one self-signed JWT for its
    hour, and checking its RSA signature on every request would cost more than a small predict
    itself (bench/NOTES.md has the figure). Bounded (oldest out first); per process."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[str, tuple[Any, float]] = collections.OrderedDict()

    def get(self, token: str) -> Any:
        with self._lock:
            found = self._entries.get(token)
            if found is None:
                return None
            if time.time() >= found[1]:
                del self._entries[token]
                return None
            return found[0]

    def put(self, token: str, value: Any, expires_at: float) -> None:
        with self._lock:
            self._entries[token] = (value, expires_at)
            self._entries.move_to_end(token)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


class CertsUrl:
    """Certificates at a URL (Google's ID-token signing keys), re-fetched when they expire.

    The answer's Cache-Control max-age says how long it holds, as google-auth's docs advise.
    """

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._certs: dict[str, str] = {}
        self._expires = 0.0

    def get(self) -> dict[str, str]:
        with self._lock:
            if time.monotonic() >= self._expires:
                self._certs, ttl = self._fetch()
                self._expires = time.monotonic() + ttl
            return self._certs

    def _fetch(self) -> tuple[dict[str, str], float]:
        import requests

        response = requests.get(self.url, timeout=self.timeout_s)
        response.raise_for_status()
        match = _MAX_AGE.search(response.headers.get("Cache-Control", ""))
        ttl = float(match.group(1)) if match else DEFAULT_CERTS_TTL_S
        return certs_from_json(response.json()), ttl
