"""Vertex AI `projects.locations.endpoints` management over HTTP (google/cloud/aiplatform/v1/
endpoint_service.proto's `google.api.http` options, googleapis/googleapis). Prediction on an
endpoint is protocols/vertex_prediction.py.

Routes (under /v1/projects/{p}/locations/{l}):
  POST   /endpoints?endpointId=               CreateEndpoint -> Operation
  GET    /endpoints                           ListEndpoints (filter, orderBy, pageSize, pageToken)
  GET    /endpoints/{e}                       GetEndpoint
  PATCH  /endpoints/{e}                       UpdateEndpoint (updateMask) -> Endpoint
  DELETE /endpoints/{e}                       DeleteEndpoint -> Operation
  POST   /endpoints/{e}:deployModel           DeployModel -> Operation
  POST   /endpoints/{e}:undeployModel         UndeployModel -> Operation
  POST   /endpoints/{e}:mutateDeployedModel   MutateDeployedModel -> Operation
"""

from __future__ import annotations

from flask import Response, request

from api._requests import use_id_converter
from api.vertex_common import LOCATION, blueprint, body, context, list_args, parent
from controlplane.vertex import endpoints
from web.google import google_json_response

bp = blueprint("vertex_endpoints")
use_id_converter(bp)
ENDPOINT = LOCATION + "/endpoints/<id:endpoint>"


def _name(project: str, location: str, endpoint: str) -> str:
    return f"{parent(project, location)}/endpoints/{endpoint}"


@bp.post(LOCATION + "/endpoints")
def create_endpoint(project: str, location: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.create_endpoint(
        emu, caller, parent(project, location), body(), request.args.get("endpointId")))


@bp.get(LOCATION + "/endpoints")
def list_endpoints(project: str, location: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.list_endpoints(
        emu, caller, parent(project, location), **list_args()))


@bp.get(ENDPOINT)
def get_endpoint(project: str, location: str, endpoint: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.get_endpoint(
        emu, caller, _name(project, location, endpoint)))


@bp.patch(ENDPOINT)
def update_endpoint(project: str, location: str, endpoint: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.update_endpoint(
        emu, caller, _name(project, location, endpoint), body(), request.args.get("updateMask")))


@bp.delete(ENDPOINT)
def delete_endpoint(project: str, location: str, endpoint: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.delete_endpoint(
        emu, caller, _name(project, location, endpoint)))


@bp.post(ENDPOINT + ":deployModel")
def deploy_model(project: str, location: str, endpoint: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.deploy_model(
        emu, caller, _name(project, location, endpoint), body()))


@bp.post(ENDPOINT + ":undeployModel")
def undeploy_model(project: str, location: str, endpoint: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.undeploy_model(
        emu, caller, _name(project, location, endpoint), body()))


@bp.post(ENDPOINT + ":mutateDeployedModel")
def mutate_deployed_model(project: str, location: str, endpoint: str) -> Response:
    emu, caller = context()
    return google_json_response(endpoints.mutate_deployed_model(
        emu, caller, _name(project, location, endpoint), body()))
