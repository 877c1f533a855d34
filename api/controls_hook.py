"""Fault rules on the ml v1 and Vertex AI management surfaces: each request is named by its
method id (as the discovery documents spell them: `versions.create`, `operations.get`, ...;
Vertex AI's `models.upload`, `endpoints.deployModel`, ...: api/vertex_method_ids.py) and handed
to the controls once, before the method runs (after its credentials were verified).

The data plane's methods (`predict`, `explain`, Vertex AI's `rawPredict`) take their faults where
the version or deployed model is resolved (dataplane.resolve, dataplane/vertex.py); this hook
names them and covers the management blueprints.
"""

from __future__ import annotations

from flask import Flask, current_app, request

from api.vertex_method_ids import PREDICTION_IDS, vertex_method_id
from observability import context
from web.http import request_caller

#: Flask endpoint (blueprint.view) -> ml v1 method id.
METHOD_IDS = {
    "ml_models.create_model": "models.create", "ml_models.list_models": "models.list",
    "ml_models.get_model": "models.get", "ml_models.patch_model": "models.patch",
    "ml_models.delete_model": "models.delete",
    "ml_versions.create_version": "versions.create", "ml_versions.list_versions": "versions.list",
    "ml_versions.get_version": "versions.get", "ml_versions.patch_version": "versions.patch",
    "ml_versions.delete_version": "versions.delete",
    "ml_versions.set_default_version": "versions.setDefault",
    "ml_operations.list_operations": "operations.list",
    "ml_operations.get_operation": "operations.get",
    "ml_operations.cancel_operation": "operations.cancel",
    "ml_operations.get_config": "projects.getConfig",
    "ml_jobs.create_job": "jobs.create", "ml_jobs.list_jobs": "jobs.list",
    "ml_jobs.get_job": "jobs.get", "ml_jobs.patch_job": "jobs.patch",
    "ml_jobs.cancel_job": "jobs.cancel",
}
#: IAM methods exist on models and jobs alike: the path's collection names the resource.
IAM_VIEWS = {"ml_iam.get_iam_policy": "getIamPolicy", "ml_iam.set_iam_policy": "setIamPolicy",
             "ml_iam.test_iam_permissions": "testIamPermissions"}


def method_id(endpoint: str | None, view_args: dict[str, str]) -> str | None:
    if endpoint in METHOD_IDS:
        return METHOD_IDS[endpoint]
    if endpoint in IAM_VIEWS:
        return f"{view_args.get('kind', 'models')}.{IAM_VIEWS[endpoint]}"
    return None


def register_controls(app: Flask) -> None:
    """Install the hook (after register_authentication: a bad credential is 401 first)."""
    @app.before_request
    def _controls() -> None:
        args = request.view_args or {}
        endpoint = request.endpoint
        if endpoint in PREDICTION_IDS:  # its faults come once the deployed model is resolved
            context.set_method("aiplatform", PREDICTION_IDS[endpoint])
            return
        vertex = vertex_method_id(endpoint)
        method = vertex or method_id(endpoint, args)
        if method is None:
            return
        context.set_method("aiplatform", method)
        project = args.get("project") or args.get("project_id") or ""
        if vertex is not None:  # an operation's `resource` is a model or an endpoint id
            view, resource = endpoint or "", args.get("resource", "")
            model = args.get("model", "") or (resource if "models_" in view else "")
            endpoint_id = args.get("endpoint", "") or (resource if "endpoints_" in view else "")
            version = ""
        else:
            model = args.get("model", "") or (args.get("rid", "") if args.get("kind") == "models"
                                              else "")
            endpoint_id, version = "", args.get("version", "")
        ctx = context.current()
        if ctx is not None:
            ctx.project, ctx.model, ctx.version = project, model, version
            ctx.endpoint = endpoint_id
            ctx.caller = request_caller().principal or ""
        current_app.extensions["mlemu"].controls.check(
            project, model, version, endpoint=endpoint_id,
            api="vertex" if vertex is not None else "ml")
