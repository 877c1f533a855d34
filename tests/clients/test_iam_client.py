"""IAM enforce mode end to end: a live `app.py serve` (gunicorn + gRPC), Google's ml v1 client
(googleapiclient) with google-auth service-account credentials made at test time, sending
self-signed JWTs. Allowed calls succeed, denied ones raise HttpError 403; a forged signature, an
expired token, a wrong audience and no credentials each get 401. The gRPC V2 service takes the
same credentials from the call's `authorization` metadata (tritonclient).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import requests
from google.auth import credentials as ga_credentials
from google.auth import jwt
from google.oauth2 import service_account
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError
from googleapiclient.http import build_http

from tests.conftest import LiveServer, free_port, start_server, stop_server
from tests.kit import iamkit, modelkit
from tests.kit.mlclient import error_of, wait_done

pytestmark = pytest.mark.slow
P = "projects/p"
ROW = [[5.1, 3.5, 1.4, 0.2]]
ADMIN = "admin@p.iam.gserviceaccount.com"
READER = "reader@p.iam.gserviceaccount.com"
DEV = "dev@p.iam.gserviceaccount.com"


class StaticToken(ga_credentials.Credentials):  # type: ignore[misc]
    """A bearer token as-is (refreshing keeps it): to send a token google-auth would not make."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def refresh(self, request: Any) -> None:
        pass


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("iam-e2e")
    estimator = modelkit.sklearn_model(root / "iris")
    keys = {email: iamkit.new_key() for email in (ADMIN, READER, DEV)}
    infos = {email: iamkit.service_account_info(email, key) for email, key in keys.items()}
    iamkit.write_key_file(root / "admin.json", infos[ADMIN])
    iamkit.write_key_file(root / "dev.json", infos[DEV])
    (root / "reader.pem").write_text(iamkit.self_signed_cert(keys[READER]))  # a certificate only
    boot = modelkit.bootstrap_file(root / "boot.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(root / "iris")}}}})
    config = iamkit.write_config(root / "iam.yaml", {
        "serviceAccounts": [
            {"keyFile": "admin.json"}, {"keyFile": "dev.json"},
            {"email": READER, "certFile": "reader.pem",
             "keyId": infos[READER]["private_key_id"]}],
        "projects": {"p": {"bindings": [
            {"role": "roles/ml.admin", "members": [f"serviceAccount:{ADMIN}"]},
            {"role": "roles/ml.viewer", "members": [f"serviceAccount:{READER}"]},
            {"role": "roles/ml.developer", "members": [f"serviceAccount:{DEV}"]}]}},
    })
    grpc_port = free_port()
    live = start_server(root / "state", boot, grpc_port=grpc_port, env={
        "MLEMU_IAM_MODE": "enforce", "MLEMU_IAM_CONFIG": str(config), "MLEMU_PROJECT": "p"})
    try:
        yield {"server": live, "infos": infos, "keys": keys, "root": root,
               "expected": estimator.predict(np.array(ROW)).tolist()}
    finally:
        stop_server(live.proc)


def client(url: str, credentials: Any) -> Any:
    """googleapiclient's ml v1 client; credentials=None sends none (a plain httplib2 client)."""
    if credentials is None:
        return build("ml", "v1", static_discovery=True, http=build_http(),
                     client_options={"api_endpoint": url}, cache_discovery=False)
    return build("ml", "v1", static_discovery=True, credentials=credentials,
                 client_options={"api_endpoint": url}, cache_discovery=False,
                 always_use_jwt_access=True)


def as_account(world: dict[str, Any], email: str) -> Any:
    """The ml client as a service account, google-auth sending self-signed JWTs (scope claim)."""
    creds = service_account.Credentials.from_service_account_info(world["infos"][email])
    return client(world["server"].url, creds.with_always_use_jwt_access(True))


def status_of(call: Any) -> tuple[int, dict[str, Any], Any]:
    with pytest.raises(HttpError) as caught:
        call.execute()
    return caught.value.resp.status, error_of(caught.value), caught.value.resp


def test_allowed_calls_succeed_and_denied_ones_are_403(world: dict[str, Any]) -> None:
    admin, reader = as_account(world, ADMIN), as_account(world, READER)
    models = reader.projects().models()
    assert [m["name"] for m in models.list(parent=P).execute()["models"]] == [f"{P}/models/iris"]
    assert models.get(name=f"{P}/models/iris").execute()["defaultVersion"]["name"].endswith("/v1")
    status, error, _ = status_of(reader.projects().predict(name=f"{P}/models/iris",
                                                           body={"instances": ROW}))
    assert (status, error["status"]) == (403, "PERMISSION_DENIED")
    assert error["message"] == ("Permission 'ml.models.predict' denied on resource "
                                f"'{P}/models/iris' (or it may not exist).")
    assert status_of(models.create(parent=P, body={"name": "nope"}))[0] == 403
    expected = world["expected"]
    assert admin.projects().predict(name=f"{P}/models/iris",
                                    body={"instances": ROW}).execute()["predictions"] == expected

    # The admin grants the reader roles/ml.modelUser on the model: prediction is now allowed.
    policy = admin.projects().models().getIamPolicy(resource=f"{P}/models/iris").execute()
    assert policy == {"etag": "ACAB"}  # the empty policy
    policy = admin.projects().models().setIamPolicy(resource=f"{P}/models/iris", body={"policy": {
        "bindings": [{"role": "roles/ml.modelUser", "members": [f"serviceAccount:{READER}"]}],
        "etag": policy["etag"]}}).execute()
    assert policy["bindings"] == [{"role": "roles/ml.modelUser",
                                   "members": [f"serviceAccount:{READER}"]}]
    assert reader.projects().predict(name=f"{P}/models/iris/versions/v1",
                                     body={"instances": ROW}).execute()["predictions"] == expected
    held = reader.projects().models().testIamPermissions(resource=f"{P}/models/iris", body={
        "permissions": ["ml.models.predict", "ml.models.delete", "ml.models.list"]}).execute()
    assert held == {"permissions": ["ml.models.predict", "ml.models.list"]}

    # A stale etag (the one before the change) is 409 ABORTED.
    status, error, _ = status_of(admin.projects().models().setIamPolicy(
        resource=f"{P}/models/iris", body={"policy": {"bindings": [], "etag": "ACAB"}}))
    assert (status, error["status"]) == (409, "ABORTED")
    assert error["message"].startswith("There were concurrent policy changes.")


def test_the_creator_of_a_model_owns_it(world: dict[str, Any]) -> None:
    """roles/ml.developer cannot deploy versions, except into models it created (modelOwner)."""
    dev = as_account(world, DEV)
    models = dev.projects().models()
    models.create(parent=P, body={"name": "mine"}).execute()
    policy = models.getIamPolicy(resource=f"{P}/models/mine").execute()
    assert policy["bindings"] == [{"role": "roles/ml.modelOwner",
                                   "members": [f"serviceAccount:{DEV}"]}]
    op = models.versions().create(parent=f"{P}/models/mine", body={
        "name": "v1", "deploymentUri": str(world["root"] / "iris")}).execute()
    assert wait_done(dev, op)["response"]["state"] == "READY"
    assert status_of(models.versions().create(parent=f"{P}/models/iris", body={
        "name": "v2", "deploymentUri": str(world["root"] / "iris")}))[0] == 403


def test_an_audience_bound_jwt_from_google_auth_is_accepted(world: dict[str, Any]) -> None:
    url = world["server"].url
    for audience in ("https://ml.googleapis.com/", url, url + "/"):
        creds = jwt.Credentials.from_service_account_info(world["infos"][READER], audience=audience)
        assert client(url, creds).projects().models().list(parent=P).execute()["models"]


def _assert_401(world: dict[str, Any], credentials: Any, message: str) -> None:
    ml = client(world["server"].url, credentials)
    status, error, resp = status_of(ml.projects().models().list(parent=P))
    assert (status, error["status"]) == (401, "UNAUTHENTICATED")
    assert error["message"].startswith(message)
    assert resp["www-authenticate"].startswith('Bearer realm="https://accounts.google.com/"')


def test_bad_tokens_and_no_credentials_are_401(world: dict[str, Any]) -> None:
    url, infos, keys = world["server"].url, world["infos"], world["keys"]
    invalid = "Request had invalid authentication credentials."
    # A forged signature: the reader's account and key id, someone else's key.
    forged = {**infos[READER], "private_key": iamkit.private_pem(iamkit.new_key())}
    _assert_401(world, service_account.Credentials.from_service_account_info(forged)
                .with_always_use_jwt_access(True), invalid)
    # An expired token, properly signed (issued two hours ago, for an hour).
    expired = iamkit.signed_jwt(keys[READER], infos[READER]["private_key_id"],
                                iamkit.self_signed_claims(READER, audience=url,
                                                          issued=time.time() - 7200))
    _assert_401(world, StaticToken(expired), invalid)
    # The wrong audience.
    _assert_401(world, jwt.Credentials.from_service_account_info(
        infos[READER], audience="https://pubsub.googleapis.com/"), invalid)
    # An unregistered account.
    stranger = iamkit.service_account_info("stranger@p.iam.gserviceaccount.com")
    _assert_401(world, service_account.Credentials.from_service_account_info(stranger)
                .with_always_use_jwt_access(True), invalid)
    # No credentials at all.
    _assert_401(world, None, "Request is missing required authentication credential.")
    # Health probes stay open.
    assert requests.get(url + "/healthz", timeout=5).status_code == 200


def test_the_command_line_client_sends_a_token(world: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from app import main

    url, reader = world["server"].url, world["infos"][READER]
    token = _bearer(jwt.Credentials.from_service_account_info(reader, audience=url))
    args = ["models", "list", "--url", url, "--project", "p"]
    listed = CliRunner().invoke(main, [*args, "--token", token["authorization"].split()[1]])
    assert listed.exit_code == 0 and "iris" in listed.output, listed.output
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code != 0 and "UNAUTHENTICATED" in refused.output


def _bearer(credentials: Any) -> dict[str, str]:
    credentials.refresh(None)  # a self-signed JWT: made locally, no token endpoint
    token = credentials.token
    return {"authorization": f"Bearer {token if isinstance(token, str) else token.decode()}"}


def test_grpc_takes_the_same_credentials_from_metadata(world: dict[str, Any]) -> None:
    import tritonclient.grpc as tgrpc
    from tritonclient.utils import InferenceServerException

    live: LiveServer = world["server"]
    assert live.grpc_target
    infos = world["infos"]
    admin = _bearer(jwt.Credentials.from_service_account_info(infos[ADMIN],
                                                               audience="https://ml.googleapis.com/"))
    triton = tgrpc.InferenceServerClient(live.grpc_target)
    data = tgrpc.InferInput("x", [1, 4], "FP64")
    data.set_data_from_numpy(np.array(ROW))
    deadline = time.monotonic() + 60
    while True:  # the gRPC process warms up on its own
        try:
            result = triton.infer("iris", [data], headers=admin)
            break
        except InferenceServerException as exc:
            if "UNAVAILABLE" not in str(exc.status()) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert result.as_numpy("output-0").tolist() == world["expected"]
    with pytest.raises(InferenceServerException) as missing:
        triton.infer("iris", [data])
    assert "UNAUTHENTICATED" in str(missing.value.status())
    reader = _bearer(jwt.Credentials.from_service_account_info(
        infos[READER], audience="https://ml.googleapis.com/"))
    with pytest.raises(InferenceServerException) as denied:  # no predict; "other" does not exist
        triton.infer("other", [data], headers=reader)
    assert "PERMISSION_DENIED" in str(denied.value.status())
    triton.close()

    # grps over gRPC: same metadata; failures come in the answer's status, as grps reports them
    import grpc

    from protocols.proto_modules import grps_pb2, grps_pb2_grpc

    request = grps_pb2.GrpsMessage(model="iris-v1")
    request.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT64, shape=[1, 4],
                                 flat_float64=ROW[0])
    with grpc.insecure_channel(live.grpc_target) as channel:
        stub = grps_pb2_grpc.GrpsServiceStub(channel)
        answer = stub.Predict(request, metadata=tuple(admin.items()), timeout=30)
        assert list(answer.gtensors.tensors[0].flat_int64) == world["expected"]
        status = stub.Predict(request, timeout=30).status
        assert (status.code, status.status) == (401, grps_pb2.Status.FAILURE), status
        request.model = "nothere-v1"  # the reader may not predict in the project: 403, no lookup
        status = stub.Predict(request, metadata=tuple(reader.items()), timeout=30).status
        assert (status.code, status.status) == (403, grps_pb2.Status.FAILURE), status
        assert stub.CheckLiveness(grps_pb2.GrpsMessage(), timeout=30).status.code == 200
        # Online/Offline change the state every caller sees (issue 17): ml.models.update on the
        # project; anonymous callers 401, the reader (roles/ml.viewer) 403, the admin may.
        empty = grps_pb2.GrpsMessage()
        assert stub.Offline(empty, timeout=30).status.code == 401
        assert stub.Online(empty, metadata=tuple(reader.items()), timeout=30).status.code == 403
        assert stub.Offline(empty, metadata=tuple(admin.items()), timeout=30).status.code == 200
        assert stub.CheckReadiness(empty, timeout=30).status.code == 503
        assert stub.Online(empty, metadata=tuple(admin.items()), timeout=30).status.code == 200
        assert stub.CheckReadiness(empty, timeout=30).status.code == 200
    # The same over HTTP; live and ready stay open.
    for path, who, status in (("offline", {}, 401), ("offline", reader, 403),
                              ("offline", admin, 200), ("ready", {}, 503), ("live", {}, 200),
                              ("online", admin, 200), ("ready", {}, 200)):
        answer = requests.post(f"{live.url}/grps/v1/health/{path}", headers=who, json={}, timeout=30)
        assert answer.status_code == status, (path, answer.text)


def test_policies_survive_a_restart(world: dict[str, Any]) -> None:
    """A model policy is in the store with the rest of the state: a restarted server applies it."""
    admin = as_account(world, ADMIN).projects().models()
    admin.create(parent=P, body={"name": "kept"}).execute()
    policy = admin.getIamPolicy(resource=f"{P}/models/kept").execute()
    policy = admin.setIamPolicy(resource=f"{P}/models/kept", body={"policy": {
        "bindings": [{"role": "roles/ml.modelOwner", "members": [f"serviceAccount:{READER}"]}],
        "etag": policy["etag"]}}).execute()
    stop_server(world["server"].proc)
    restarted = start_server(world["root"] / "state", world["root"] / "boot.yaml", env={
        "MLEMU_IAM_MODE": "enforce", "MLEMU_IAM_CONFIG": str(world["root"] / "iam.yaml"),
        "MLEMU_PROJECT": "p"})
    world["server"] = restarted
    try:
        assert as_account(world, ADMIN).projects().models().getIamPolicy(
            resource=f"{P}/models/kept").execute() == policy
        reader = as_account(world, READER).projects().models()
        reader.patch(name=f"{P}/models/kept", updateMask="description",
                     body={"description": "owned by the reader"}).execute()
        assert status_of(reader.patch(name=f"{P}/models/iris", updateMask="description",
                                      body={"description": "x"}))[0] == 403
    finally:
        stop_server(restarted.proc)
