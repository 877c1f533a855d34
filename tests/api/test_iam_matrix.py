"""IAM enforce mode, every route against every predefined role (held on the project and on the
model): a call is allowed exactly when the role grants the permission the issue's table names for
that route, on a resource the binding reaches. Also: health probes stay open, a 403 reveals
nothing, groups / domain / allUsers / allAuthenticatedUsers membership, custom roles.

In-process (Flask test client), identities from static tokens. Mutating calls are made so that
they fail *after* the permission check (a malformed body, a version that does not exist, a model
that still has versions), so "allowed" shows as a 4xx other than 401/403 and nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auth import roles
from core.settings import Settings
from tests.kit import iamkit, modelkit

ROLES = sorted(roles.PREDEFINED)
ADMIN = "admin-token"
ROW = [[5.1, 3.5, 1.4, 0.2]]
V2_BODY = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": ROW}]}
GRPS = {"data": json.dumps({"ndarray": ROW}), "content_type": "application/json"}
M = "/v1/projects/p/models/m"
L = "/v1/projects/p/locations/us-central1"

#: (HTTP method, path, request kwargs, permission the route needs or None for "any verified
#: caller", where the permission is checked: "project" or "model" (the model or a version)).
ROUTES: list[tuple[str, str, dict[str, Any], str | None, str]] = [
    # ml v1 management
    ("POST", "/v1/projects/p/models", {"json": {"name": "not a valid id"}}, "ml.models.create", "project"),
    ("GET", "/v1/projects/p/models", {}, "ml.models.list", "project"),
    ("GET", M, {}, "ml.models.get", "model"),
    ("PATCH", M, {"json": {"description": "x"}}, "ml.models.update", "model"),  # no updateMask
    ("DELETE", M, {}, "ml.models.delete", "model"),  # refused: the model has versions
    ("POST", f"{M}/versions", {"json": {"name": "v9"}}, "ml.versions.create", "model"),
    ("GET", f"{M}/versions", {}, "ml.versions.list", "model"),
    ("GET", f"{M}/versions/v1", {}, "ml.versions.get", "model"),
    ("PATCH", f"{M}/versions/ghost?updateMask=description", {"json": {}}, "ml.versions.update",
     "model"),
    ("DELETE", f"{M}/versions/ghost", {}, "ml.versions.delete", "model"),
    ("POST", f"{M}/versions/ghost:setDefault", {"json": {}}, "ml.models.update", "model"),
    ("GET", "/v1/projects/p/operations", {}, "ml.operations.list", "project"),
    ("GET", "/v1/projects/p/operations/ghost", {}, "ml.operations.get", "project"),
    ("POST", "/v1/projects/p/operations/ghost:cancel", {}, "ml.operations.cancel", "project"),
    ("GET", "/v1/projects/p:getConfig", {}, "ml.projects.getConfig", "project"),
    ("POST", "/v1/projects/p/jobs", {"json": {"jobId": "not a valid id"}}, "ml.jobs.create",
     "project"),
    ("GET", "/v1/projects/p/jobs", {}, "ml.jobs.list", "project"),
    ("GET", "/v1/projects/p/jobs/ghost", {}, "ml.jobs.get", "project"),
    ("POST", "/v1/projects/p/jobs/ghost:cancel", {}, "ml.jobs.cancel", "project"),
    ("PATCH", "/v1/projects/p/jobs/ghost", {"json": {}}, "ml.jobs.update", "project"),  # no mask
    ("GET", f"{M}:getIamPolicy", {}, "ml.models.getIamPolicy", "model"),
    ("POST", f"{M}:setIamPolicy", {"json": {"policy": {"bindings": [
        {"role": "roles/no.such", "members": ["user:x@example.com"]}]}}},
     "ml.models.setIamPolicy", "model"),
    ("POST", f"{M}:testIamPermissions", {"json": {"permissions": ["ml.models.get"]}}, None, "model"),
    # AI Platform online prediction
    ("POST", f"{M}:predict", {"json": {"instances": ROW}}, "ml.models.predict", "model"),
    ("POST", f"{M}/versions/v1:predict", {"json": {"instances": ROW}}, "ml.versions.predict", "model"),
    # AI Explanations (v1 has no explanationConfig: an allowed caller gets FAILED_PRECONDITION)
    ("POST", f"{M}:explain", {"json": {"instances": ROW}}, "ml.models.predict", "model"),
    ("POST", f"{M}/versions/v1:explain", {"json": {"instances": ROW}}, "ml.versions.predict", "model"),
    # TensorFlow Serving REST
    ("GET", "/v1/models/m", {}, "ml.models.get", "model"),
    ("GET", "/v1/models/m/versions/1", {}, "ml.versions.get", "model"),
    ("GET", "/v1/models/m/metadata", {}, "ml.models.get", "model"),
    ("GET", "/v1/models/m/versions/1/metadata", {}, "ml.versions.get", "model"),
    ("POST", "/v1/models/m:predict", {"json": {"instances": ROW}}, "ml.models.predict", "model"),
    ("POST", "/v1/models/m/versions/1:predict", {"json": {"instances": ROW}}, "ml.versions.predict",
     "model"),
    ("GET", "/v1/models/m/labels/stable/metadata", {}, "ml.versions.get", "model"),
    ("POST", "/v1/models/m/labels/stable:predict", {"json": {"instances": ROW}},
     "ml.versions.predict", "model"),
    ("POST", "/v1/models/m:classify", {"json": {"examples": [{"x": 1.0}]}}, "ml.models.predict",
     "model"),
    ("POST", "/v1/models/m/versions/1:regress", {"json": {"examples": [{"x": 1.0}]}},
     "ml.versions.predict", "model"),
    # Open Inference Protocol V2 REST
    ("GET", "/v2", {}, None, "project"),
    ("GET", "/v2/models/m", {}, "ml.models.get", "model"),
    ("GET", "/v2/models/m/versions/v1", {}, "ml.versions.get", "model"),
    ("GET", "/v2/models/m/ready", {}, "ml.models.get", "model"),
    ("GET", "/v2/models/m/versions/v1/ready", {}, "ml.versions.get", "model"),
    ("POST", "/v2/models/m/infer", {"json": V2_BODY}, "ml.models.predict", "model"),
    ("POST", "/v2/models/m/versions/v1/infer", {"json": V2_BODY}, "ml.versions.predict", "model"),
    # grps HTTP
    ("POST", "/grps/v1/infer/predict?model=m", GRPS, "ml.models.predict", "model"),
    ("POST", "/grps/v1/infer/predict?model=m-v1", GRPS, "ml.versions.predict", "model"),
    ("POST", "/grps/v1/metadata/model", {"json": {"str_data": "m"}}, "ml.models.get", "model"),
    ("POST", "/grps/v1/metadata/model", {"json": {"str_data": "m-v1"}}, "ml.versions.get", "model"),
    ("GET", "/grps/v1/metadata/server", {}, "ml.models.list", "project"),
    # grps online changes what every caller sees (issue 17); offline has its own test
    ("GET", "/grps/v1/health/online", {}, "ml.models.update", "project"),
    # Vertex AI (aiplatform.* permissions, checked on the project: docs/vertex.md)
    ("POST", f"{L}/models:upload", {"json": {"model": {}}}, "aiplatform.models.upload", "project"),
    ("GET", f"{L}/models", {}, "aiplatform.models.list", "project"),
    ("GET", f"{L}/models/ghost", {}, "aiplatform.models.get", "project"),
    ("PATCH", f"{L}/models/ghost", {"json": {}}, "aiplatform.models.update", "project"),
    ("DELETE", f"{L}/models/ghost", {}, "aiplatform.models.delete", "project"),
    ("POST", f"{L}/endpoints", {"json": {}}, "aiplatform.endpoints.create", "project"),
    ("GET", f"{L}/endpoints", {}, "aiplatform.endpoints.list", "project"),
    ("GET", f"{L}/endpoints/ghost", {}, "aiplatform.endpoints.get", "project"),
    ("DELETE", f"{L}/endpoints/ghost", {}, "aiplatform.endpoints.delete", "project"),
    ("POST", f"{L}/endpoints/ghost:deployModel", {"json": {}}, "aiplatform.endpoints.deploy",
     "project"),
    ("POST", f"{L}/endpoints/ghost:undeployModel", {"json": {}}, "aiplatform.endpoints.undeploy",
     "project"),
    ("POST", f"{L}/endpoints/ghost:predict", {"json": {"instances": ROW}},
     "aiplatform.endpoints.predict", "project"),
    ("GET", f"{L}/operations", {}, "aiplatform.operations.list", "project"),
    ("GET", f"{L}/operations/ghost", {}, "aiplatform.operations.get", "project"),
]
HEALTH = ["/healthz", "/readyz", "/v2/health/live", "/v2/health/ready", "/grps/v1/health/live",
          "/grps/v1/health/ready"]


def principal(role: str, level: str) -> str:
    return f"user:{level}-{role.removeprefix('roles/').replace('.', '-')}@example.com"


def token(role: str, level: str) -> str:
    return f"{level}:{role}"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from app import create_app

    root = tmp_path_factory.mktemp("iam-matrix")
    modelkit.sklearn_model(root / "iris")
    boot = modelkit.bootstrap_file(root / "boot.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": str(root / "iris")}},
              "serving": {"labels": {"stable": "v1"}}},
        "other": {"versions": {"v1": {"deploymentUri": str(root / "iris")}}}})
    tokens = {token(r, level): principal(r, level) for r in ROLES for level in ("project", "model")}
    tokens[ADMIN] = "serviceAccount:admin@p.iam.gserviceaccount.com"
    iam = iamkit.write_config(root / "iam.yaml", {
        "staticTokens": tokens,
        "projects": {"p": {"bindings": [
            {"role": "roles/ml.admin", "members": ["serviceAccount:admin@p.iam.gserviceaccount.com"]},
            *({"role": r, "members": [principal(r, "project")]} for r in ROLES)]}},
    })
    settings = Settings(state_dir=root / "state", config_file=boot, iam_config=iam,
                        iam_mode="enforce", default_project="p")
    test_client = create_app(settings, warm=False).test_client()
    policy = test_client.post(f"{M}:setIamPolicy", headers=iamkit.bearer(ADMIN), json={"policy": {
        "bindings": [{"role": r, "members": [principal(r, "model")]} for r in ROLES]}})
    assert policy.status_code == 200, policy.get_json()
    assert test_client.get("/grps/v1/health/online", headers=iamkit.bearer(ADMIN)).status_code == 200
    yield test_client


def call(client: Any, method: str, path: str, kwargs: dict[str, Any], who: str | None) -> Any:
    headers = iamkit.bearer(who) if who else {}
    return client.open(path, method=method, headers=headers, **kwargs)


@pytest.mark.parametrize("level", ["project", "model"])
@pytest.mark.parametrize("role", ROLES)
def test_every_route_allows_exactly_what_the_role_grants(client: Any, role: str, level: str) -> None:
    granted = roles.PREDEFINED[role]
    wrong = []
    for method, path, kwargs, permission, scope in ROUTES:
        reaches = level == "project" or scope == "model"
        allowed = permission is None or (permission in granted and reaches)
        response = call(client, method, path, kwargs, token(role, level))
        ok = response.status_code not in (401, 403) and response.status_code < 500
        if ok != allowed or (not allowed and response.status_code != 403):
            wrong.append(f"{method} {path} needs {permission} on the {scope}: "
                         f"{response.status_code} {response.get_data(as_text=True)[:200]}")
    assert not wrong, f"{role} held on the {level}:\n" + "\n".join(wrong)


def test_model_bindings_do_not_reach_other_models(client: Any) -> None:
    who = token("roles/ml.admin", "model")
    assert call(client, "GET", f"{M}", {}, who).status_code == 200
    assert call(client, "GET", "/v1/projects/p/models/other", {}, who).status_code == 403
    assert call(client, "POST", "/v2/models/other/infer", {"json": V2_BODY}, who).status_code == 403


def test_health_probes_are_open_and_everything_else_needs_credentials(client: Any) -> None:
    for path in HEALTH:  # ready probes may say 503 (models not loaded yet), never 401/403
        assert call(client, "GET", path, {}, None).status_code in (200, 503), path
    for method, path, kwargs, _, _ in ROUTES:
        response = call(client, method, path, kwargs, None)
        assert response.status_code == 401, (method, path, response.get_data(as_text=True))
        assert response.headers["WWW-Authenticate"].startswith('Bearer realm="https://accounts')
    locations = ("GET", "/v1/projects/p/locations", {})  # unimplemented: 501
    assert call(client, *locations, None).status_code == 401
    assert call(client, *locations, token("roles/viewer", "project")).status_code == 501


def test_bad_credentials_are_401_on_every_route_even_unknown_ones(client: Any) -> None:
    for method, path, kwargs, _, _ in [*ROUTES, ("GET", "/v1/projects/p/nothing/here", {}, None, ""),
                                       ("GET", "/v1/projects/p/jobs", {}, None, "")]:
        response = call(client, method, path, kwargs, "not-a-known-token")
        assert response.status_code == 401, (method, path)
        assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    body = call(client, "GET", M, {}, "x.y.z").get_json()["error"]
    assert body["status"] == "UNAUTHENTICATED"
    assert body["message"].startswith("Request had invalid authentication credentials.")


def _denied(client: Any, method: str, path: str, kwargs: dict[str, Any]) -> tuple[int, str, str]:
    response = call(client, method, path, kwargs, token("roles/ml.modelUser", "model"))
    return response.status_code, response.mimetype, response.get_data(as_text=True)


@pytest.mark.parametrize(("method", "template", "kwargs"), [
    ("GET", "/v1/projects/p/models/{}", {}),
    ("DELETE", "/v1/projects/p/models/{}", {}),
    ("POST", "/v1/projects/p/models/{}:predict", {"json": {"instances": ROW}}),
    ("GET", "/v1/projects/p/models/{}:getIamPolicy", {}),
    ("POST", "/v1/models/{}:predict", {"json": {"instances": ROW}}),
    ("POST", "/v2/models/{}/infer", {"json": V2_BODY}),
    ("POST", "/grps/v1/infer/predict?model={}", GRPS),
])
def test_a_403_reveals_nothing(client: Any, method: str, template: str, kwargs: dict[str, Any]) -> None:
    """The same status and body, but for the name, for a model that exists and one that does not
    (the caller holds roles/ml.modelUser on model m only)."""
    existing = _denied(client, method, template.format("other"), kwargs)
    missing = _denied(client, method, template.format("ghost"), kwargs)
    assert existing[0] == missing[0] == 403
    assert existing[1] == missing[1]
    assert existing[2].replace("other", "NAME") == missing[2].replace("ghost", "NAME")


def test_members_groups_domains_and_everyone(make_app: Any, tmp_path: Path) -> None:
    modelkit.sklearn_model(tmp_path / "iris")
    boot = modelkit.bootstrap_file(tmp_path / "boot.yaml", {
        "open": {"versions": {"v1": {"deploymentUri": str(tmp_path / "iris")}}},
        "team": {"versions": {"v1": {"deploymentUri": str(tmp_path / "iris")}}}})
    iam = iamkit.write_config(tmp_path / "iam.yaml", {
        "staticTokens": {"ann": "user:Ann@Example.com", "bob": "user:bob@other.org",
                         "eve": "user:eve@corp.example", "ci": "serviceAccount:ci@p.iam.gserviceaccount.com"},
        "groups": {"ml-team@example.com": ["group:interns@example.com"],
                   "interns@example.com": ["user:ann@example.com"]},
        "customRoles": {"projects/p/roles/lister": ["ml.models.list"]},
        "projects": {"p": {"bindings": [
            {"role": "roles/ml.viewer", "members": ["domain:corp.example"]},
            {"role": "projects/p/roles/lister", "members": ["allAuthenticatedUsers"]}]}},
    })
    client = make_app(boot, iam_mode="enforce", iam_config=iam)
    admin = client.application.extensions["mlemu"]
    import auth

    auth.put_policy(admin, "projects/p/models/open", auth.Policy(
        [auth.Binding("roles/ml.modelUser", ["allUsers"])], auth.new_etag()))
    auth.put_policy(admin, "projects/p/models/team", auth.Policy(
        [auth.Binding("roles/ml.modelUser", ["group:ml-team@example.com"])], auth.new_etag()))

    def status(path: str, who: str | None, method: str = "GET", **kwargs: Any) -> int:
        return int(call(client, method, path, kwargs, who).status_code)

    predict = {"json": {"instances": ROW}}
    # allUsers: even without credentials
    assert status("/v1/projects/p/models/open:predict", None, "POST", **predict) == 200
    # group (nested, emails case-insensitive)
    assert status("/v1/projects/p/models/team:predict", "ann", "POST", **predict) == 200
    assert status("/v1/projects/p/models/team:predict", "bob", "POST", **predict) == 403
    assert status("/v1/projects/p/models/team:predict", None, "POST", **predict) == 401
    # domain: users of the domain
    assert status("/v1/projects/p/models/team", "eve") == 200
    assert status("/v1/projects/p/models/team:predict", "eve", "POST", **predict) == 403  # viewer
    assert status("/v1/projects/p/models/team", "bob") == 403
    # allAuthenticatedUsers through a custom role
    assert status("/v1/projects/p/models", "ci") == 200
    assert status("/v1/projects/p/models", None) == 401
    assert status("/v1/projects/p/operations", "ci") == 403
