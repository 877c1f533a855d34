"""ml v1 `projects.operations` and `projects.getConfig` over HTTP.

Routes:
  GET  /v1/projects/{project}/operations               operations.list (filter, pageSize, pageToken)
  GET  /v1/projects/{project}/operations/{operation}   operations.get
  POST /v1/projects/{project}/operations/{operation}:cancel   operations.cancel -> {}
  GET  /v1/projects/{project}:getConfig                projects.getConfig
Spec: https://cloud.google.com/ai-platform/prediction/docs/reference/rest/v1/projects.operations
"""

from __future__ import annotations

from flask import Blueprint, Response

from api._requests import bool_arg, context, list_args, use_id_converter
from controlplane import operations, project
from web.google import google_json_response

bp = Blueprint("ml_operations", __name__)
use_id_converter(bp)


@bp.get("/v1/projects/<project_id>/operations")
def list_operations(project_id: str) -> Response:
    emu, caller = context()
    return google_json_response(operations.list_operations(
        emu, caller, f"projects/{project_id}", **list_args(),
        return_partial_success=bool_arg("returnPartialSuccess")))


@bp.get("/v1/projects/<project_id>/operations/<id:operation>")
def get_operation(project_id: str, operation: str) -> Response:
    emu, caller = context()
    return google_json_response(operations.get_operation(
        emu, caller, f"projects/{project_id}/operations/{operation}"))


@bp.post("/v1/projects/<project_id>/operations/<id:operation>:cancel")
def cancel_operation(project_id: str, operation: str) -> Response:
    emu, caller = context()
    return google_json_response(operations.cancel_operation(
        emu, caller, f"projects/{project_id}/operations/{operation}"))


@bp.get("/v1/projects/<project_id>:getConfig")
def get_config(project_id: str) -> Response:
    emu, caller = context()
    return google_json_response(project.get_config(emu, caller, f"projects/{project_id}"))
