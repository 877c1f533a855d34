"""ml v1 `projects.models.versions` over HTTP (https://cloud.google.com/ai-platform/prediction/
docs/reference/rest/v1/projects.models.versions).

Routes (under /v1/projects/{project}/models/{model}):
  POST   /versions                      versions.create -> Operation
  GET    /versions                      versions.list (filter, pageSize, pageToken)
  GET    /versions/{version}            versions.get
  PATCH  /versions/{version}            versions.patch (updateMask) -> Operation
  DELETE /versions/{version}            versions.delete -> Operation
  POST   /versions/{version}:setDefault versions.setDefault -> Version
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from api._requests import body, context, list_args, use_id_converter
from controlplane import versions
from web.google import google_json_response

bp = Blueprint("ml_versions", __name__)
use_id_converter(bp)
COLLECTION = "/v1/projects/<project>/models/<id:model>/versions"
RESOURCE = COLLECTION + "/<id:version>"


def _name(project: str, model: str, version: str) -> str:
    return f"projects/{project}/models/{model}/versions/{version}"


@bp.post(COLLECTION)
def create_version(project: str, model: str) -> Response:
    emu, caller = context()
    parent = f"projects/{project}/models/{model}"
    return google_json_response(versions.create_version(emu, caller, parent, body()))


@bp.get(COLLECTION)
def list_versions(project: str, model: str) -> Response:
    emu, caller = context()
    parent = f"projects/{project}/models/{model}"
    return google_json_response(versions.list_versions(emu, caller, parent, **list_args()))


@bp.get(RESOURCE)
def get_version(project: str, model: str, version: str) -> Response:
    emu, caller = context()
    return google_json_response(versions.get_version(emu, caller, _name(project, model, version)))


@bp.patch(RESOURCE)
def patch_version(project: str, model: str, version: str) -> Response:
    emu, caller = context()
    return google_json_response(versions.patch_version(emu, caller, _name(project, model, version),
                                                body(), request.args.get("updateMask")))


@bp.delete(RESOURCE)
def delete_version(project: str, model: str, version: str) -> Response:
    emu, caller = context()
    return google_json_response(versions.delete_version(emu, caller, _name(project, model, version)))


@bp.post(RESOURCE + ":setDefault")
def set_default_version(project: str, model: str, version: str) -> Response:
    emu, caller = context()
    return google_json_response(versions.set_default_version(emu, caller, _name(project, model, version),
                                                      body(required=False)))
