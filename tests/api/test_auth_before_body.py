"""Authentication and the path's authorization come before the body is read (issue 17, item 4):
in IAM mode `enforce` a caller who may not predict gets 401/403 for a body that is not even JSON,
on every protocol, instead of the 400 that decoding it would give."""

import pytest

from core.settings import Settings
from tests.kit import iamkit, modelkit

USER, OUTSIDER = "user-token", "outsider-token"
BAD = b"{bad"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from app import create_app

    root = tmp_path_factory.mktemp("auth-first")
    modelkit.sklearn_model(root / "iris")
    boot = modelkit.bootstrap_file(root / "boot.yaml", {"m": {"versions": {
        "v1": {"deploymentUri": str(root / "iris")}}}})
    iam = iamkit.write_config(root / "iam.yaml", {
        "staticTokens": {USER: "user:u@example.com", OUTSIDER: "user:o@example.com"},
        "projects": {"p": {"bindings": [{"role": "roles/ml.modelUser",
                                         "members": ["user:u@example.com"]}]}}})
    settings = Settings(state_dir=root / "state", config_file=boot, iam_config=iam,
                        iam_mode="enforce", default_project="p")
    return create_app(settings, warm=False).test_client()


ROUTES = [
    ("/v1/projects/p/models/m:predict", "application/json"),
    ("/v1/projects/p/models/m/versions/v1:predict", "application/json"),
    ("/v1/models/m:predict", "application/json"),
    ("/v1/models/m/versions/1:predict", "application/json"),
    ("/v2/models/m/infer", "application/json"),
    ("/v2/models/m/versions/v1/infer", "application/json"),
    ("/grps/v1/infer/predict?model=m", "application/json"),
    ("/grps/v1/infer/predict", "application/json"),
]



@pytest.mark.parametrize("path, content_type", ROUTES)
def test_anonymous_callers_get_401_without_the_body_being_decoded(client, path, content_type):
    answer = client.post(path, data=BAD, headers={"Content-Type": content_type})
    assert answer.status_code == 401, answer.data
    assert "authentication credential" in answer.get_data(as_text=True)


@pytest.mark.parametrize("path, content_type", ROUTES[:-1])
def test_callers_without_the_permission_get_403_before_the_body(client, path, content_type):
    answer = client.post(path, data=BAD, headers={"Content-Type": content_type,
                                                  **iamkit.bearer(OUTSIDER)})
    assert answer.status_code == 403, answer.data


@pytest.mark.parametrize("path, content_type", ROUTES)
def test_permitted_callers_get_the_decoding_error(client, path, content_type):
    answer = client.post(path, data=BAD, headers={"Content-Type": content_type,
                                                  **iamkit.bearer(USER)})
    assert answer.status_code == 400, answer.data


MANAGEMENT = [
    ("POST", "/v1/projects/p/models"),
    ("PATCH", "/v1/projects/p/models/m"),
    ("POST", "/v1/projects/p/models/m/versions"),
    ("PATCH", "/v1/projects/p/models/m/versions/v1"),
    ("POST", "/v1/projects/p/models/m/versions/v1:setDefault"),
    ("POST", "/v1/projects/p/models/m:setIamPolicy"),
    ("POST", "/v1/projects/p/models/m:testIamPermissions"),
    ("POST", "/v1/projects/p/jobs"),
    ("PATCH", "/v1/projects/p/jobs/j"),
    ("POST", "/v1/projects/p/jobs/j:cancel"),
]


@pytest.mark.parametrize("method, path", MANAGEMENT)
def test_management_bodies_wait_for_authentication(client, method, path):
    """ml v1 management methods: an anonymous body that is not JSON gets 401 (Google's error
    object), not the 400 decoding it would give."""
    answer = client.open(path, method=method, data=BAD,
                         headers={"Content-Type": "application/json"})
    assert answer.status_code == 401, answer.data
    assert answer.get_json()["error"]["status"] == "UNAUTHENTICATED"
    signed = client.open(path, method=method, data=BAD,
                         headers={"Content-Type": "application/json", **iamkit.bearer(USER)})
    assert signed.status_code == 400, signed.data


def test_explain_checks_the_caller_before_the_size_or_the_body(client):
    big = b'{"instances": [' + b"[1.0, 2.0, 3.0, 4.0], " * 80_000 + b"[1.0, 2.0, 3.0, 4.0]]}"
    assert len(big) > 1_500_000
    for path in ("/v1/projects/p/models/m:explain", "/v1/projects/p/models/m/versions/v1:explain"):
        for data in (BAD, big):
            answer = client.post(path, data=data, headers={"Content-Type": "application/json"})
            assert answer.status_code == 401, answer.data
            denied = client.post(path, data=data, headers={"Content-Type": "application/json",
                                                           **iamkit.bearer(OUTSIDER)})
            assert denied.status_code == 403, denied.data


def test_grps_model_metadata_waits_for_authentication(client):
    answer = client.post("/grps/v1/metadata/model", data=BAD,
                         headers={"Content-Type": "application/json"})
    assert answer.status_code == 401, answer.data


def test_the_fast_path_checks_first_too(client):
    # A plain :predict with a Content-Length goes through PredictFastPath, not Flask's view.
    answer = client.post("/v1/projects/p/models/m:predict", data=BAD,
                         headers={"Content-Type": "application/json", "Content-Length": "4"})
    assert answer.status_code == 401
