"""Test-time IAM material: IAM config files, service-account keys (RSA, made with cryptography),
self-signed certificates and Google-style ID tokens signed with google-auth."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

ML_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def service_account_info(email: str, key: rsa.RSAPrivateKey | None = None,
                         key_id: str | None = None) -> dict[str, str]:
    """A service-account key file's content, as `gcloud iam service-accounts keys create` writes."""
    return {
        "type": "service_account", "project_id": email.split("@")[1].split(".", maxsplit=1)[0],
        "private_key_id": key_id or uuid.uuid4().hex, "private_key": private_pem(key or new_key()),
        "client_email": email, "client_id": "1" + uuid.uuid4().int.__str__()[:20],
        "token_uri": "https://oauth2.googleapis.com/token",
    }


def write_key_file(path: Path, info: dict[str, str]) -> Path:
    path.write_text(json.dumps(info))
    return path


def self_signed_cert(key: rsa.RSAPrivateKey, name: str = "mlemu-test") -> str:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def signed_jwt(key: rsa.RSAPrivateKey, key_id: str, claims: dict[str, Any]) -> str:
    """A JWT signed by google-auth's RSA signer (what its credentials produce)."""
    signer = crypt.RSASigner.from_string(private_pem(key), key_id=key_id)
    return jwt.encode(signer, claims).decode()


def self_signed_claims(email: str, *, audience: str | None = None, scope: str | None = None,
                       issued: float | None = None, lifetime: int = 3600) -> dict[str, Any]:
    now = int(time.time() if issued is None else issued)
    claims: dict[str, Any] = {"iss": email, "sub": email, "iat": now, "exp": now + lifetime}
    if audience is not None:
        claims["aud"] = audience
    if scope is not None:
        claims["scope"] = scope
    return claims


def id_token_claims(email: str, audience: str, *, issuer: str = "https://accounts.google.com",
                    issued: float | None = None) -> dict[str, Any]:
    """What Google puts in an ID token (the Cloud Run invoker flow)."""
    now = int(time.time() if issued is None else issued)
    return {"iss": issuer, "aud": audience, "azp": email, "sub": str(abs(hash(email))),
            "email": email, "email_verified": True, "iat": now, "exp": now + 3600}
