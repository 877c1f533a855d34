"""AI Platform Prediction online prediction (ml.googleapis.com/v1 `projects.predict`).

Routes:
  POST /v1/projects/{project}/models/{model}:predict                     (default version)
  POST /v1/projects/{project}/models/{model}/versions/{version}:predict

Body `{"instances": [...], ...}`; every other top-level key is passed to a custom predictor as a
keyword argument (built-in frameworks refuse unknown keys). Success is `{"predictions": [...]}`.
A failure inside the model is HTTP 400 `{"error": "Prediction failed: ..."}`, as the real
service answers; resource and request errors use the Google error object.
Spec: https://cloud.google.com/ai-platform/prediction/docs/reference/rest/v1/projects/predict
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from flask import Blueprint, Response, current_app
from werkzeug.exceptions import HTTPException

import dataplane
from api._google import check_standard_params, error_response, json_response
from errors import ApiError, Internal, InvalidArgument, PredictionFailed
from payloads import ModelRef, PredictRequest
from protocols._http import decode_json, read_body, request_caller
from protocols._http import json_response as plain_json

log = logging.getLogger("mlemu.aiplatform")
bp = Blueprint("aiplatform", __name__)


def decode_request(body: Any) -> PredictRequest:
    if not isinstance(body, dict):
        raise InvalidArgument(
            "Invalid JSON payload received. The request body must be a JSON object with an "
            "'instances' list."
        )
    if "instances" not in body:
        raise InvalidArgument(
            "Invalid JSON payload received. Missing required field 'instances': the request "
            'must look like {"instances": [...]}.'
        )
    instances = body["instances"]
    if not isinstance(instances, list):
        raise InvalidArgument(
            f"Invalid JSON payload received. 'instances' must be a list, got "
            f"{type(instances).__name__}."
        )
    if not instances:
        raise InvalidArgument("Invalid JSON payload received. 'instances' must not be empty.")
    parameters = {k: v for k, v in body.items() if k != "instances"}
    return PredictRequest(instances=instances, parameters=parameters)


def encode_predictions(predictions: Any) -> Any:
    if isinstance(predictions, (list, dict, str, int, float, bool)) or predictions is None:
        return predictions
    if hasattr(predictions, "tolist"):
        return predictions.tolist()
    if isinstance(predictions, Iterable):  # a custom predictor may yield its predictions
        return list(predictions)
    return predictions


def _predict(ref: ModelRef) -> Response:
    emu = current_app.extensions["mlemu"]
    caller = request_caller()
    check_standard_params()
    body = decode_json(read_body(emu.settings.max_request_bytes))
    req = decode_request(body)
    result = dataplane.predict(emu, caller, ref, req)
    return json_response({"predictions": encode_predictions(result.predictions)})


@bp.post("/v1/projects/<project>/models/<model>:predict")
def predict_model(project: str, model: str) -> Response:
    return _predict(ModelRef(project, model))


@bp.post("/v1/projects/<project>/models/<model>/versions/<version>:predict")
def predict_version(project: str, model: str, version: str) -> Response:
    return _predict(ModelRef(project, model, version))


@bp.errorhandler(ApiError)
def _api_error(exc: ApiError) -> Response:
    if isinstance(exc, PredictionFailed):
        return plain_json({"error": exc.message}, exc.http_status)
    return error_response(exc)


@bp.errorhandler(Exception)
def _unexpected(exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        return current_app.handle_http_exception(exc)  # type: ignore[return-value]
    log.exception("prediction failed unexpectedly")
    return error_response(Internal("Internal error encountered."))

