"""Vertex AI `projects.locations.models` over HTTP (google/cloud/aiplatform/v1/
model_service.proto's `google.api.http` options, googleapis/googleapis).

Routes (under /v1/projects/{p}/locations/{l}):
  POST   /models:upload                     UploadModel -> Operation
  GET    /models                            ListModels (filter, orderBy, pageSize, pageToken)
  GET    /models/{model}                    GetModel (`{model}` may end in @VERSION or @ALIAS)
  GET    /models/{model}:listVersions       ListModelVersions
  PATCH  /models/{model}                    UpdateModel (updateMask) -> Model
  POST   /models/{model}:mergeVersionAliases MergeVersionAliases -> Model
  DELETE /models/{model}:deleteVersion      DeleteModelVersion -> Operation
  DELETE /models/{model}                    DeleteModel -> Operation
"""

from __future__ import annotations

from flask import Response, request

from api._requests import use_id_converter
from api.vertex_common import LOCATION, blueprint, body, context, list_args, parent
from controlplane.vertex import models
from web.google import google_json_response

bp = blueprint("vertex_models")
use_id_converter(bp)
MODEL = LOCATION + "/models/<id:model>"


def _name(project: str, location: str, model: str) -> str:
    return f"{parent(project, location)}/models/{model}"


@bp.post(LOCATION + "/models:upload")
def upload_model(project: str, location: str) -> Response:
    emu, caller = context()
    return google_json_response(models.upload_model(emu, caller, parent(project, location),
                                                    body()))


@bp.get(LOCATION + "/models")
def list_models(project: str, location: str) -> Response:
    emu, caller = context()
    return google_json_response(models.list_models(emu, caller, parent(project, location),
                                                   **list_args()))


@bp.get(MODEL)
def get_model(project: str, location: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.get_model(emu, caller, _name(project, location, model)))


@bp.get(MODEL + ":listVersions")
def list_versions(project: str, location: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.list_model_versions(
        emu, caller, _name(project, location, model), **list_args()))


@bp.patch(MODEL)
def update_model(project: str, location: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.update_model(
        emu, caller, _name(project, location, model), body(), request.args.get("updateMask")))


@bp.post(MODEL + ":mergeVersionAliases")
def merge_version_aliases(project: str, location: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.merge_version_aliases(
        emu, caller, _name(project, location, model), body()))


@bp.delete(MODEL + ":deleteVersion")
def delete_version(project: str, location: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.delete_model_version(
        emu, caller, _name(project, location, model)))


@bp.delete(MODEL)
def delete_model(project: str, location: str, model: str) -> Response:
    emu, caller = context()
    return google_json_response(models.delete_model(emu, caller, _name(project, location, model)))
