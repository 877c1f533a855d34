"""Fault rules on the ml v1 management surface: each request is named by its method id (as the
discovery document spells it: `versions.create`, `operations.get`, ...) and handed to the
controls once, before the method runs (after its credentials were verified).

The data plane's methods (`predict`, `explain`) take their faults where the version is resolved
(dataplane.resolve); this hook covers the blueprints api.management lists.
"""

from __future__ import annotations

from flask import Flask, current_app, request

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
        method = method_id(request.endpoint, args)
        if method is None:
            return
        context.set_method("aiplatform", method)
        project = args.get("project") or args.get("project_id") or ""
        model = args.get("model", "") or (args.get("rid", "") if args.get("kind") == "models"
                                          else "")
        version = args.get("version", "")
        ctx = context.current()
        if ctx is not None:
            ctx.project, ctx.model, ctx.version = project, model, version
            ctx.caller = request_caller().principal or ""
        current_app.extensions["mlemu"].controls.check(project, model, version)
