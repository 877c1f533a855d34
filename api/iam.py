"""ml v1 IAM methods on models and jobs over HTTP (https://cloud.google.com/ai-platform/prediction/
docs/reference/rest/v1/projects.models/getIamPolicy, setIamPolicy, testIamPermissions; the same
three under projects.jobs).

Routes ({kind} is `models` or `jobs`):
  GET  /v1/projects/{project}/{kind}/{id}:getIamPolicy       (options.requestedPolicyVersion)
  POST /v1/projects/{project}/{kind}/{id}:setIamPolicy       {"policy": {...}, "updateMask"}
  POST /v1/projects/{project}/{kind}/{id}:testIamPermissions {"permissions": [...]}
"""

from __future__ import annotations

from flask import Blueprint, Response

from api._requests import body, context, int_arg, use_id_converter
from controlplane import iam
from web.google import google_json_response

bp = Blueprint("ml_iam", __name__)
use_id_converter(bp)
RESOURCE = "/v1/projects/<project>/<any(models, jobs):kind>/<id:rid>"


@bp.get(RESOURCE + ":getIamPolicy")
def get_iam_policy(project: str, kind: str, rid: str) -> Response:
    emu, caller = context()
    return google_json_response(iam.get_iam_policy(emu, caller, f"projects/{project}/{kind}/{rid}",
                                                   int_arg("options.requestedPolicyVersion")))


@bp.post(RESOURCE + ":setIamPolicy")
def set_iam_policy(project: str, kind: str, rid: str) -> Response:
    emu, caller = context()
    return google_json_response(iam.set_iam_policy(emu, caller, f"projects/{project}/{kind}/{rid}",
                                                   body()))


@bp.post(RESOURCE + ":testIamPermissions")
def test_iam_permissions(project: str, kind: str, rid: str) -> Response:
    emu, caller = context()
    return google_json_response(iam.test_iam_permissions(
        emu, caller, f"projects/{project}/{kind}/{rid}", body()))
