"""Vertex AI PredictionService over REST: predict, rawPredict and explain on an endpoint
(google/cloud/aiplatform/v1/prediction_service.proto's `google.api.http` options, googleapis/
googleapis). Not to be confused with protocols/vertex.py, the custom-container contract mlemu
follows when it runs inside a Vertex AI container.

Routes (under /v1/projects/{p}/locations/{l}):
  POST /endpoints/{e}:predict     {"instances": [...], "parameters": {...}} -> {"predictions",
                                  "deployedModelId", "model", "modelDisplayName", "modelVersionId"}
  POST /endpoints/{e}:rawPredict  the body as the model server takes it ({"instances": ...}) ->
                                  the model server's body ({"predictions": [...]}), the deployed
                                  model named in X-Vertex-AI-* headers
  POST /endpoints/{e}:explain     {"instances", "parameters", "deployedModelId"} -> {"explanations",
                                  "deployedModelId", "predictions"} (explainers/vertex_spec.py)

The permission the path names is checked before the body is read. Errors are the Google error
object (google.rpc.Status), as the service answers.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Response, current_app, request

from core.errors import InvalidArgument
from core.payloads import PredictRequest
from dataplane import vertex as vertex_dataplane
from protocols.aiplatform import encode_predictions
from protocols.vertex import decode_vertex_predict
from web.google import google_error_response, google_json
from web.handlers import register_error_renderer
from web.http import decode_json, read_body, request_caller

log = logging.getLogger("mlemu.vertex")
bp = Blueprint("vertex_prediction", __name__)
register_error_renderer(bp, google_error_response, log)
ENDPOINT = "/v1/projects/<project>/locations/<location>/endpoints/<endpoint>"


def _endpoint(project: str, location: str, endpoint: str) -> str:
    return f"projects/{project}/locations/{location}/endpoints/{endpoint}"


def _read(permission: str, name: str) -> tuple[Any, Any, Any]:
    emu = current_app.extensions["mlemu"]
    caller = request_caller()
    vertex_dataplane.admit(emu, caller, name, permission)
    return emu, caller, decode_json(read_body(emu.settings.max_request_bytes))


def _json(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(google_json(body, pretty=False), mimetype="application/json",
                    headers=headers)


@bp.post(ENDPOINT + ":predict")
def predict(project: str, location: str, endpoint: str) -> Response:
    name = _endpoint(project, location, endpoint)
    emu, caller, body = _read(vertex_dataplane.PREDICT, name)
    target, result = vertex_dataplane.predict(emu, caller, name, decode_vertex_predict(body))
    return _json({"predictions": encode_predictions(result.predictions),
                  **vertex_dataplane.identity(target)})


@bp.post(ENDPOINT + ":rawPredict")
def raw_predict(project: str, location: str, endpoint: str) -> Response:
    """A custom container (MLEMU_VERTEX_LOCAL_CONTAINERS) gets the body and content type as
    they came and its status, content type and body are answered. The prebuilt model servers
    take `{"instances": [...]}` and answer `{"predictions": [...]}`; rawPredict passes both
    through without Vertex AI's wrapping."""
    name = _endpoint(project, location, endpoint)
    emu, caller = current_app.extensions["mlemu"], request_caller()
    vertex_dataplane.admit(emu, caller, name)
    data = read_body(emu.settings.max_request_bytes)
    target, predictor = vertex_dataplane.resolve(emu, caller, name, vertex_dataplane.PREDICT)
    headers = vertex_dataplane.identity_headers(target)
    forwarded = vertex_dataplane.forward_raw(emu, target, predictor, data,
                                             request.content_type or "")
    if forwarded is not None:
        status, content_type, answer = forwarded
        return Response(answer, status=status, headers=headers,
                        content_type=content_type or "application/octet-stream")
    body = decode_json(data)
    if not isinstance(body, dict) or not isinstance(body.get("instances"), list):
        raise InvalidArgument('The model server takes a JSON body {"instances": [...]}.')
    req = PredictRequest(body["instances"], body.get("parameters") or {})
    result = vertex_dataplane.predict_on(emu, target, predictor, req)
    return _json({"predictions": encode_predictions(result.predictions)}, headers)


EXPLAIN_KEYS = ("instances", "parameters", "explanationSpecOverride", "deployedModelId")


@bp.post(ENDPOINT + ":explain")
def explain(project: str, location: str, endpoint: str) -> Response:
    name = _endpoint(project, location, endpoint)
    emu, caller, body = _read(vertex_dataplane.EXPLAIN, name)
    if not isinstance(body, dict):
        raise InvalidArgument("Invalid JSON payload received. Expected an ExplainRequest object.")
    extra = {k: body[k] for k in EXPLAIN_KEYS[2:] if k in body}
    req = decode_vertex_predict({k: v for k, v in body.items() if k not in extra})
    override = extra.get("explanationSpecOverride")
    if override is not None and not isinstance(override, dict):
        raise InvalidArgument("explanationSpecOverride must be an object.")
    deployed = extra.get("deployedModelId")
    target, predictions, explanations = vertex_dataplane.explain(
        emu, caller, name, req, str(deployed) if deployed else None, override)
    return _json({"explanations": explanations, "deployedModelId": target.deployed_model_id,
                  "predictions": encode_predictions(predictions)})
