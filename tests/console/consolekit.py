"""Helpers of the console tests: a bootstrap project with one scikit-learn model, reading the
CSRF field out of a page, an IAM config with static tokens."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.kit.iamkit import write_config
from tests.kit.modelkit import bootstrap_file, sklearn_model

PROJECT = "demo"
ADMIN_TOKEN, NOBODY_TOKEN = "console-admin-token", "console-nobody-token"


def iris_bootstrap(tmp_path: Path) -> Path:
    """Project `demo`: model `iris`, version `v1` (logistic regression over 4 features)."""
    sklearn_model(tmp_path / "models" / "iris")
    return bootstrap_file(tmp_path / "boot.yaml", {"iris": {"versions": {"v1": {
        "deploymentUri": str(tmp_path / "models" / "iris"), "framework": "SCIKIT_LEARN"}}}},
        project=PROJECT)


def iam_config(tmp_path: Path) -> Path:
    """Two static tokens: an ml.admin of `demo`, and a principal bound to nothing."""
    return write_config(tmp_path / "iam.yaml", {
        "staticTokens": {ADMIN_TOKEN: "user:ann@example.com", NOBODY_TOKEN: "user:bob@example.com"},
        "projects": {PROJECT: {"bindings": [{"role": "roles/ml.admin",
                                             "members": ["user:ann@example.com"]}]}},
    })


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF field on the page"
    return found.group(1)


def form(page: str, **fields: Any) -> dict[str, Any]:
    return {"csrf": csrf_of(page), **fields}


def without_routes(client: Any, *prefixes: str) -> None:
    """Make the app behind `client` answer 404 under `prefixes`, as a build without those
    routes does (Flask's own words for an unknown URL): a stand-in for a build that lacks the
    emulator controls or the Vertex AI API, whichever this build has."""
    import json as _json

    inner = client.application.wsgi_app

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if any(path.startswith(prefix) for prefix in prefixes):
            message = f"The requested URL {path} was not found on this server."
            body = _json.dumps({"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}
                               if path.startswith("/v1/") else {"error": message}).encode()
            start_response("404 NOT FOUND", [("Content-Type", "application/json"),
                                             ("Content-Length", str(len(body)))])
            return [body]
        return inner(environ, start_response)

    client.application.wsgi_app = app
