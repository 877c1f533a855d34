"""IAM pieces in-process: the role table, credential verification (self-signed JWTs, Google-signed
ID tokens from a certificate file, a certificate URL and a JWK set, static tokens, the principal
header), the IAM config file's checks, and the IAM methods' rules (etag, creator ownership,
policies in the store across a restart, deletion)."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import auth
from auth import identity, roles
from core.errors import Unauthenticated, Unavailable
from core.settings import Settings
from tests.kit import iamkit, modelkit

SA = "runner@p.iam.gserviceaccount.com"
KID = "key-1"
ROW = [[5.1, 3.5, 1.4, 0.2]]


def test_roles_match_the_issue_and_the_published_lists() -> None:
    developer, viewer = roles.PREDEFINED["roles/ml.developer"], roles.PREDEFINED["roles/ml.viewer"]
    for missing in ("ml.versions.create", "ml.versions.update", "ml.versions.delete",
                    "ml.models.update", "ml.models.delete"):
        assert missing not in developer
    assert {"ml.models.create", "ml.models.predict", "ml.versions.predict"} <= developer
    assert "ml.models.predict" not in viewer and "ml.versions.predict" not in viewer
    assert roles.PREDEFINED["roles/ml.modelUser"] == {
        "ml.models.get", "ml.models.predict", "ml.versions.get", "ml.versions.list",
        "ml.versions.predict"}
    assert roles.PREDEFINED["roles/viewer"] >= viewer | {"ml.models.predict", "ml.versions.predict"}
    assert "ml.models.setIamPolicy" not in roles.PREDEFINED["roles/editor"]
    assert "ml.models.setIamPolicy" in roles.PREDEFINED["roles/ml.admin"]
    assert roles.PREDEFINED["roles/owner"] >= roles.PREDEFINED["roles/ml.admin"] - {
        p for p in roles.PREDEFINED["roles/ml.admin"] if p.startswith("resourcemanager.")}
    assert roles.PREDEFINED["roles/ml.operationOwner"] == {
        "ml.operations.cancel", "ml.operations.get", "ml.operations.list"}
    assert all(p.startswith("ml.jobs.") for p in roles.PREDEFINED["roles/ml.jobOwner"])


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return {"sa": iamkit.new_key(), "google": iamkit.new_key(), "other": iamkit.new_key()}


class CertsServer(http.server.BaseHTTPRequestHandler):
    body = b"{}"
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "public, max-age=600")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def certs_url(keys: dict[str, Any]) -> Iterator[str]:
    numbers = keys["google"].public_key().public_numbers()

    def b64(n: int) -> str:
        return base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).decode().rstrip("=")

    CertsServer.body = json.dumps({"keys": [{"kid": "g1", "kty": "RSA", "alg": "RS256", "use": "sig",
                                             "n": b64(numbers.n), "e": b64(numbers.e)}]}).encode()
    CertsServer.hits = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CertsServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/oauth2/v3/certs"
    server.shutdown()


def _settings(tmp_path: Path, data: dict[str, Any], **extra: Any) -> tuple[Settings, auth.IamConfig]:
    settings = Settings(state_dir=tmp_path / "state", iam_mode="enforce",
                        iam_config=iamkit.write_config(tmp_path / "iam.yaml", data),
                        port=8080, public_url="https://mlemu.example.com", **extra)
    return settings, auth.load_config(settings)


def _verify(settings: Settings, config: auth.IamConfig, header: str | None) -> Any:
    return identity.identify(settings, config, {"Authorization": header} if header else {})


def _rejected(settings: Settings, config: auth.IamConfig, token: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        _verify(settings, config, f"Bearer {token}")
    assert caught.value.message.startswith("Request had invalid authentication credentials.")
    return str(caught.value.details[0]["reason"])


def test_self_signed_jwts(tmp_path: Path, keys: dict[str, Any]) -> None:
    (tmp_path / "sa.json").write_text(json.dumps({KID: iamkit.self_signed_cert(keys["sa"])}))
    settings, config = _settings(tmp_path, {
        "serviceAccounts": [{"email": SA, "certFile": "sa.json"}],
        "audiences": ["https://gateway.example.com/ml"]})

    def sign(claims: dict[str, Any], key: Any = None, kid: str = KID) -> str:
        return iamkit.signed_jwt(key or keys["sa"], kid, claims)

    caller = f"serviceAccount:{SA}"
    for audience in ("https://ml.googleapis.com/", "https://mlemu.example.com",
                     "http://127.0.0.1:8080/", "https://gateway.example.com/ml/"):
        token = sign(iamkit.self_signed_claims(SA, audience=audience))
        assert _verify(settings, config, f"Bearer {token}").principal == caller, audience
    scoped = sign(iamkit.self_signed_claims(SA, scope=iamkit.ML_SCOPE))
    assert _verify(settings, config, f"bearer {scoped}").principal == caller
    expired = sign(iamkit.self_signed_claims(SA, audience="https://ml.googleapis.com/",
                                             issued=time.time() - 7200))
    assert _rejected(settings, config, expired) == "ACCESS_TOKEN_EXPIRED"
    for bad in (
        sign(iamkit.self_signed_claims(SA, audience="https://storage.googleapis.com/")),
        sign(iamkit.self_signed_claims(SA, scope="https://www.googleapis.com/auth/devstorage")),
        sign(iamkit.self_signed_claims(SA)),  # neither aud nor scope
        sign(iamkit.self_signed_claims(SA, audience="https://ml.googleapis.com/", lifetime=7200)),
        sign(iamkit.self_signed_claims(SA, audience="https://ml.googleapis.com/",
                                       issued=time.time() + 600)),  # issued in the future
        sign({**iamkit.self_signed_claims(SA, audience="https://ml.googleapis.com/"),
              "sub": "someone@else.com"}),
        sign(iamkit.self_signed_claims(SA, audience="https://ml.googleapis.com/"), keys["other"]),
        sign(iamkit.self_signed_claims("x@p.iam.gserviceaccount.com",
                                       audience="https://ml.googleapis.com/")),
        "not.a.jwt", "ya29.opaque-access-token",
    ):
        _rejected(settings, config, bad)
    # alg "none": an unsigned token with a valid-looking body
    head = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').decode().rstrip("=")
    body = base64.urlsafe_b64encode(json.dumps(iamkit.self_signed_claims(
        SA, audience="https://ml.googleapis.com/")).encode()).decode().rstrip("=")
    _rejected(settings, config, f"{head}.{body}.")
    with pytest.raises(Unauthenticated):
        _verify(settings, config, "Basic dXNlcjpwYXNz")
    assert _verify(settings, config, None).is_anonymous


def test_key_files_and_static_tokens_and_the_principal_header(tmp_path: Path, keys: dict[str, Any]) -> None:
    info = iamkit.service_account_info(SA, keys["sa"], KID)
    iamkit.write_key_file(tmp_path / "key.json", info)
    settings, config = _settings(tmp_path, {
        "serviceAccounts": [{"keyFile": "key.json"}], "staticTokens": {"s3cret": "user:ann@example.com"}})
    token = iamkit.signed_jwt(keys["sa"], KID, iamkit.self_signed_claims(SA, scope=iamkit.ML_SCOPE))
    assert _verify(settings, config, f"Bearer {token}").principal == f"serviceAccount:{SA}"
    assert _verify(settings, config, "Bearer s3cret").principal == "user:ann@example.com"
    assert identity.identify(settings, config, {"X-Mlemu-Principal": "user:bob@x.com"}).is_anonymous

    settings, config = _settings(tmp_path, {"principalHeader": "X-Mlemu-Principal"})
    for value, expected in (("user:bob@x.com", "user:bob@x.com"), ("bob@x.com", "user:bob@x.com"),
                            ("accounts.google.com:bob@x.com", "user:bob@x.com"),
                            ("ci@p.iam.gserviceaccount.com", "serviceAccount:ci@p.iam.gserviceaccount.com")):
        caller = identity.identify(settings, config, {"X-Mlemu-Principal": value})
        assert (caller.principal, caller.authenticated) == (expected, True)
    with pytest.raises(Unauthenticated):
        identity.identify(settings, config, {"X-Mlemu-Principal": "group:all@x.com"})


def _id_token(key: Any, kid: str, **claims: Any) -> str:
    base = iamkit.id_token_claims("ann@example.com", "https://mlemu-abc-uc.a.run.app")
    return iamkit.signed_jwt(key, kid, {**base, **claims})


def test_google_signed_id_tokens_from_a_certificate_file(tmp_path: Path, keys: dict[str, Any]) -> None:
    (tmp_path / "certs.json").write_text(json.dumps({"g1": iamkit.self_signed_cert(keys["google"])}))
    settings, config = _settings(tmp_path, {"idTokens": {
        "certsFile": "certs.json", "audiences": ["https://mlemu-abc-uc.a.run.app"]}})
    caller = _verify(settings, config, f"Bearer {_id_token(keys['google'], 'g1')}")
    assert (caller.principal, caller.authenticated) == ("user:ann@example.com", True)
    robot = _id_token(keys["google"], "g1", email="ci@p.iam.gserviceaccount.com")
    assert _verify(settings, config, f"Bearer {robot}").principal == \
        "serviceAccount:ci@p.iam.gserviceaccount.com"
    own = _id_token(keys["google"], "g1", aud="https://mlemu.example.com/")  # the public URL
    assert _verify(settings, config, f"Bearer {own}").principal == "user:ann@example.com"
    for bad in (_id_token(keys["google"], "g1", aud="https://elsewhere.run.app"),
                _id_token(keys["google"], "g1", iss="https://evil.example.com"),
                _id_token(keys["google"], "g1", email_verified=False),
                _id_token(keys["google"], "g2"),  # unknown key id
                _id_token(keys["other"], "g1"),  # forged
                _id_token(keys["google"], "g1", iat=int(time.time()) - 7200,
                          exp=int(time.time()) - 3600)):
        _rejected(settings, config, bad)


def test_google_signed_id_tokens_from_a_certificate_url(tmp_path: Path, keys: dict[str, Any],
                                                        certs_url: str) -> None:
    settings, config = _settings(tmp_path, {"idTokens": {
        "certsUrl": certs_url, "audiences": ["https://mlemu-abc-uc.a.run.app"]}})
    for _ in range(3):
        assert _verify(settings, config, f"Bearer {_id_token(keys['google'], 'g1')}").principal == \
            "user:ann@example.com"
    assert CertsServer.hits == 1  # cached for the answer's max-age
    _rejected(settings, config, _id_token(keys["other"], "g1"))

    settings, config = _settings(tmp_path, {"idTokens": {"certsUrl": "http://127.0.0.1:9/nothing"}})
    with pytest.raises(Unavailable):
        _verify(settings, config, f"Bearer {_id_token(keys['google'], 'g1')}")


@pytest.mark.parametrize(("data", "complaint"), [
    ({"nonsense": 1}, "unknown key(s) nonsense"),
    ({"projects": {"p": {"bindings": [{"role": "roles/ml.nope", "members": ["user:a@b.c"]}]}}},
     "Role roles/ml.nope is not supported"),
    ({"projects": {"p": {"bindings": [{"role": "roles/viewer", "members": ["ann@b.c"]}]}}},
     "The member ann@b.c is of an unknown type"),
    ({"groups": {"g@b.c": ["someone"]}}, "The member someone is of an unknown type"),
    ({"staticTokens": {"t": "group:g@b.c"}}, "expected a principal like user:EMAIL"),
    ({"serviceAccounts": [{"keyFile": "missing.json"}]}, "not a usable service-account key file"),
    ({"serviceAccounts": [{"certFile": "x.pem"}]}, "a certFile needs the account's email"),
    ({"idTokens": {"certsUrl": "http://x", "certsFile": "y"}}, "give certsUrl or certsFile"),
])
def test_config_mistakes_are_reported_at_start(tmp_path: Path, data: dict[str, Any], complaint: str) -> None:
    with pytest.raises(auth.IamConfigError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        _settings(tmp_path, data)


def test_an_unknown_iam_mode_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(auth.IamConfigError, match="MLEMU_IAM_MODE must be one of off, enforce"):
        auth.load_config(Settings(state_dir=tmp_path, iam_mode="strict"))


@pytest.fixture
def enforced(make_app: Any, tmp_path: Path) -> Any:
    modelkit.sklearn_model(tmp_path / "iris")
    iam = iamkit.write_config(tmp_path / "iam.yaml", {
        "staticTokens": {"dev": "user:dev@example.com", "admin": "user:admin@example.com",
                         "other": "user:other@example.com"},
        "projects": {"p": {"bindings": [
            {"role": "roles/ml.developer", "members": ["user:dev@example.com", "user:other@example.com"]},
            {"role": "roles/ml.admin", "members": ["user:admin@example.com"]}]}}})

    def start() -> Any:
        return make_app(iam_mode="enforce", iam_config=iam)

    client = start()
    client.restart = start
    client.model_dir = str(tmp_path / "iris")
    return client


def _as(who: str) -> dict[str, str]:
    return iamkit.bearer(who)


def test_the_creator_owns_the_model_and_policies_are_durable(enforced: Any) -> None:
    m = "/v1/projects/p/models"
    assert enforced.post(m, json={"name": "mine"}, headers=_as("dev")).status_code == 200
    policy = enforced.get(f"{m}/mine:getIamPolicy", headers=_as("dev")).get_json()
    assert policy["bindings"] == [{"role": "roles/ml.modelOwner", "members": ["user:dev@example.com"]}]
    assert policy["version"] == 1 and base64.b64decode(policy["etag"])[:2] == b"\x07\x05"
    # the owner may change its model; another developer may not
    patch = {"json": {"description": "d"}, "query_string": {"updateMask": "description"}}
    assert enforced.patch(f"{m}/mine", headers=_as("dev"), **patch).status_code == 200
    assert enforced.patch(f"{m}/mine", headers=_as("other"), **patch).status_code == 403
    held = enforced.post(f"{m}/mine:testIamPermissions", headers=_as("other"),
                         json={"permissions": ["ml.models.get", "ml.models.update"]}).get_json()
    assert held == {"permissions": ["ml.models.get"]}

    restarted = enforced.restart()  # a new app over the same state directory
    assert restarted.get(f"{m}/mine:getIamPolicy", headers=_as("admin")).get_json() == policy

    # deleting the model drops its policy: a model re-created under the name starts afresh
    op = restarted.delete(f"{m}/mine", headers=_as("admin")).get_json()
    deadline = time.monotonic() + 30
    while not op.get("done"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
        op = restarted.get(f"/v1/{op['name']}", headers=_as("admin")).get_json()
    assert "error" not in op, op
    assert restarted.post(m, json={"name": "mine"}, headers=_as("admin")).status_code == 200
    assert restarted.get(f"{m}/mine:getIamPolicy", headers=_as("admin")).get_json()["bindings"] == [
        {"role": "roles/ml.modelOwner", "members": ["user:admin@example.com"]}]
    assert restarted.patch(f"{m}/mine", headers=_as("dev"), **patch).status_code == 403


def test_set_iam_policy_rules(enforced: Any) -> None:
    m = "/v1/projects/p/models"
    admin = _as("admin")
    enforced.post(m, json={"name": "pol"}, headers=admin)
    current = enforced.get(f"{m}/pol:getIamPolicy", headers=admin).get_json()

    def set_policy(policy: dict[str, Any], **extra: Any) -> Any:
        return enforced.post(f"{m}/pol:setIamPolicy", headers=admin, json={"policy": policy, **extra})

    binding = {"role": "roles/ml.modelUser", "members": ["user:dev@example.com", "group:g@x.com"]}
    first = set_policy({"bindings": [binding], "etag": current["etag"]})
    assert first.status_code == 200 and first.get_json()["etag"] != current["etag"]
    stale = set_policy({"bindings": [], "etag": current["etag"]})
    assert stale.status_code == 409
    error = stale.get_json()["error"]
    assert error["status"] == "ABORTED" and "did not match the current policy's ETag" in error["message"]
    assert enforced.get(f"{m}/pol:getIamPolicy", headers=admin).get_json() == first.get_json()
    # without an etag the policy is replaced blindly; updateMask can leave bindings alone
    audit = [{"service": "ml.googleapis.com", "auditLogConfigs": [{"logType": "DATA_READ"}]}]
    kept = set_policy({"auditConfigs": audit}, updateMask="auditConfigs").get_json()
    assert kept["bindings"] == [binding] and kept["auditConfigs"] == audit
    for bad, complaint in (
        ({"bindings": [{"role": "roles/ml.modelUser", "members": ["dev@example.com"]}]},
         "is of an unknown type"),
        ({"bindings": [{"role": "roles/ml.nope", "members": ["user:a@b.c"]}]}, "is not supported"),
        ({"bindings": [{**binding, "condition": {"expression": "true"}}]}, "Conditional role bindings"),
        ({"bindings": [{"role": "roles/ml.modelUser", "members": []}]}, "at least one member"),
        ({"bindigns": []}, 'Unknown name "bindigns"'),
    ):
        response = set_policy(bad)
        assert response.status_code == 400, bad
        assert complaint in response.get_json()["error"]["message"]
    assert enforced.get(f"{m}/ghost:getIamPolicy", headers=admin).status_code == 404
    assert enforced.post(f"{m}/ghost:setIamPolicy", headers=admin,
                         json={"policy": {}}).status_code == 404
    wildcard = enforced.post(f"{m}/pol:testIamPermissions", headers=admin,
                             json={"permissions": ["ml.*"]})
    assert wildcard.status_code == 400
    assert enforced.post(f"{m}/pol:testIamPermissions", headers=admin,
                         json={"permissions": ["ml.models.fly"]}).get_json() == {}
    anonymous = enforced.post(f"{m}/pol:testIamPermissions", json={"permissions": ["ml.models.get"]})
    assert anonymous.status_code == 401


def test_iam_off_allows_everything_and_reads_no_credentials(make_app: Any) -> None:
    client = make_app()
    m = "/v1/projects/p/models"
    assert client.post(m, json={"name": "free"}, headers=iamkit.bearer("garbage")).status_code == 200
    assert client.get(f"{m}/free:getIamPolicy").get_json() == {"etag": "ACAB"}
    held = client.post(f"{m}/free:testIamPermissions",
                       json={"permissions": ["ml.models.delete", "ml.versions.predict"]}).get_json()
    assert held == {"permissions": ["ml.models.delete", "ml.versions.predict"]}


def test_verified_tokens_are_reused_only_until_they_expire(tmp_path: Path, keys: dict[str, Any]) -> None:
    from auth.keys import TokenCache

    (tmp_path / "sa.pem").write_text(iamkit.public_pem(keys["sa"]))
    settings, config = _settings(tmp_path, {"serviceAccounts": [{"email": SA, "certFile": "sa.pem"}]})
    token = iamkit.signed_jwt(keys["sa"], KID, iamkit.self_signed_claims(SA, scope=iamkit.ML_SCOPE))
    first = _verify(settings, config, f"Bearer {token}")
    assert config.verified.get(token) == first == _verify(settings, config, f"Bearer {token}")
    cache = TokenCache(size=2)
    cache.put("old", "a", time.time() - 1)
    cache.put("b", "b", time.time() + 60)
    cache.put("c", "c", time.time() + 60)
    cache.put("d", "d", time.time() + 60)
    assert [cache.get(t) for t in ("old", "b", "c", "d")] == [None, None, "c", "d"]
