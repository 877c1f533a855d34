"""ml v1 `projects.models` over HTTP (https://cloud.google.com/ai-platform/prediction/docs/
reference/rest/v1/projects.models).

Routes:
  POST   /v1/projects/{project}/models                   models.create
  GET    /v1/projects/{project}/models                   models.list (filter, pageSize, pageToken)
  GET    /v1/projects/{project}/models/{model}           models.get
  PATCH  /v1/projects/{project}/models/{model}           models.patch (updateMask) -> Operation
  DELETE /v1/projects/{project}/models/{model}           models.delete -> Operation
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from api._requests import body, context, list_args, use_id_converter
from controlplane import models
from web.google import google_json_response

bp = Blueprint("ml_models", __name__)
use_id_converter(bp)
COLLECTION = "/v1/projects/<project>/models"
RESOURCE = "/v1/projects/<project>/models/<id:model>"


@bp.post(COLLECTION)
def create_model(project: str) -> Response:
    emu, caller = context()
    return google_json_response(models.create_model(emu, caller, f"projects/{project}", body()))


@bp.get(COLLECTION)
def list_models(project: str) -> Response:
    emu, caller = context()
    return google_json_response(models.list_models(emu, caller, f"projects/{project}", **list_args()))


@bp.get(RESOURCE)
def get_model(project: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.get_model(emu, caller, f"projects/{project}/models/{model}"))


@bp.patch(RESOURCE)
def patch_model(project: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.patch_model(emu, caller, f"projects/{project}/models/{model}",
                                            body(), request.args.get("updateMask")))


@bp.delete(RESOURCE)
def delete_model(project: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.delete_model(emu, caller, f"projects/{project}/models/{model}"))
