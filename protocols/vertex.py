"""Vertex AI custom-container contract: the same image serves as a Vertex AI endpoint container.

Spec: https://cloud.google.com/vertex-ai/docs/predictions/custom-container-requirements
When AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE and AIP_STORAGE_URI are set (settings.VertexSettings;
AIP_HTTP_PORT is the port), the model at AIP_STORAGE_URI is registered as model `vertex`, version
`v1` of the default project (emulator.register_vertex_model; framework detected from its files,
or the custom predictor MLEMU_VERTEX_PREDICTION_CLASS from MLEMU_VERTEX_PACKAGE_URIS) and served
on Vertex AI's routes:

  GET  $AIP_HEALTH_ROUTE   200 {} once that model is loaded; 503 {"error": {...}} while it loads
                           or when it cannot be loaded (the message says why)
  POST $AIP_PREDICT_ROUTE  {"instances": [...], "parameters": {...}} -> 200
                           {"predictions": [...], "deployedModelId": "$AIP_DEPLOYED_MODEL_ID"}

`parameters` becomes the predictor's keyword arguments (built-in frameworks refuse unknown ones,
custom predictors get them all). Any other top-level key is refused, as Vertex AI's PredictRequest
has only these two fields. `deployedModelId` is the PredictResponse field Vertex AI adds
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/PredictResponse); it is present when
Vertex AI set AIP_DEPLOYED_MODEL_ID. Errors use the Google API error object
{"error": {"code", "message", "status"}}, the shape endpoints.predict answers with.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Response, current_app

import dataplane
from core.errors import InvalidArgument, Unavailable
from core.payloads import ModelRef, PredictRequest
from core.settings import Settings
from emulator import Emulator
from emulator.vertex_container import VERTEX_MODEL, VERTEX_VERSION, vertex_version_name
from protocols.aiplatform import encode_predictions
from web.google import google_error_response
from web.handlers import register_error_renderer
from web.http import decode_json, json_response, read_body, request_caller

log = logging.getLogger("mlemu.vertex")
REQUEST_KEYS = ("instances", "parameters")


def decode_vertex_predict(body: Any) -> PredictRequest:
    """A Vertex AI PredictRequest body (parsed JSON): `instances` and `parameters` only."""
    if not isinstance(body, dict):
        raise InvalidArgument('Invalid JSON payload received. Expected an object like '
                              '{"instances": [...], "parameters": {...}}.')
    unknown = [key for key in body if key not in REQUEST_KEYS]
    if unknown:  # Google's wording for fields a request message does not have
        names = " ".join(f'Unknown name "{key}": Cannot find field.' for key in unknown)
        raise InvalidArgument(f"Invalid JSON payload received. {names}")
    instances = body.get("instances")
    if not isinstance(instances, list) or not instances:
        raise InvalidArgument("Invalid JSON payload received. 'instances' must be a non-empty "
                              "list.")
    parameters = body.get("parameters")
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        raise InvalidArgument(f"Invalid JSON payload received. 'parameters' must be an object, "
                              f"got {type(parameters).__name__}.")
    return PredictRequest(instances=instances, parameters=parameters)


def _emulator() -> Emulator:
    emu: Emulator = current_app.extensions["mlemu"]
    return emu


def health() -> Response:
    emu = _emulator()
    if not emu.is_ready():
        raise Unavailable("The model is loading.")
    version = emu.store.get_version(vertex_version_name(emu.settings))
    if version is None or version.state != "READY":
        reason = version.error_message if version is not None else "it is not registered"
        raise Unavailable(f"The model at AIP_STORAGE_URI cannot be served: {reason}")
    emu.deployments.get(version)  # loaded by warm-up already; a cache hit
    return json_response({})


def predict() -> Response:
    emu = _emulator()
    caller = request_caller()
    ref = ModelRef(emu.settings.default_project, VERTEX_MODEL, VERTEX_VERSION)
    dataplane.admit(emu, caller, ref)
    body = decode_json(read_body(emu.settings.max_request_bytes))
    req = decode_vertex_predict(body)
    result = dataplane.predict(emu, caller, ref, req)
    out: dict[str, Any] = {"predictions": encode_predictions(result.predictions)}
    vertex = emu.settings.vertex
    if vertex is not None and vertex.deployed_model_id:
        out["deployedModelId"] = vertex.deployed_model_id
    return json_response(out)


def make_blueprint(settings: Settings) -> Blueprint:
    """The blueprint for this container's AIP_* routes (which come from the environment)."""
    assert settings.vertex is not None
    bp = Blueprint("vertex", __name__)
    bp.add_url_rule(settings.vertex.health_route, "health", health, methods=["GET"])
    bp.add_url_rule(settings.vertex.predict_route, "predict", predict, methods=["POST"])
    register_error_renderer(bp, google_error_response, log)
    return bp
