"""TensorFlow Serving RESTful API (https://www.tensorflow.org/tfx/serving/api_rest) over the registry.

Routes (model names are ml v1 models of the default project, `MLEMU_PROJECT`; versions and labels
map to ml v1 versions as protocols/tfserving_versions.py explains):
  GET  /v1/models/{m}[/versions/{n}|/labels/{l}]            model status
  GET  /v1/models/{m}[/versions/{n}|/labels/{l}]/metadata   signature metadata
  POST /v1/models/{m}[/versions/{n}|/labels/{l}]:predict    row (`instances`) or columnar (`inputs`)
  POST /v1/models/{m}[/versions/{n}|/labels/{l}]:classify   `examples` (+ `context`) as tf.Example
  POST /v1/models/{m}[/versions/{n}|/labels/{l}]:regress

Paths are matched with TF Serving's own patterns (http_rest_api_util.cc, case-insensitive), so an
unmatched one is its 400 "Malformed request". Errors are `{"error": "<message>"}` with the status
TF Serving gives the canonical code (http_server.cc: INVALID_ARGUMENT and FAILED_PRECONDITION 400,
NOT_FOUND 404, ...). JSON bodies may hold NaN / Infinity / -Infinity and produce them.
Every framework answers `:predict`; `:classify` and `:regress` need a TensorFlow signature.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from flask import Blueprint, Response, current_app, request

import wirejson
from errors import ApiError, InvalidArgument, PredictionFailed
from predictors import json_example, json_tensor
from predictors.tensorflow import TensorFlowPredictor
from protocols import tfserving_metadata
from protocols import tfserving_versions as versions
from web.handlers import register_error_renderer
from web.http import error_json, json_response, read_body, request_caller

log = logging.getLogger("mlemu.tfserving")
bp = Blueprint("tfserving", __name__)

# tensorflow_serving/model_servers/http_rest_api_util.cc: kPredictionApiGegex, kModelStatusApiRegex
_POST_PATH = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)",
    re.IGNORECASE)
_GET_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?",
    re.IGNORECASE)


def _emu() -> Any:
    return current_app.extensions["mlemu"]


def _number(text: str | None) -> int | None:
    if not text:
        return None
    number = int(text)
    if number >= 2 ** 63:
        raise InvalidArgument(f"Failed to convert version: {text} to numeric.")
    return number


def _body() -> dict[str, Any]:
    """The JSON object body, with TF Serving's parse errors."""
    data = read_body(_emu().settings.max_request_bytes)
    if not data.strip():
        raise InvalidArgument("JSON Parse error: The document is empty")
    try:
        body = wirejson.loads(data)
    except wirejson.DecodeError as exc:
        raise InvalidArgument(f"JSON Parse error: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidArgument(f"JSON Value: {data[:80].decode(errors='replace')} Is not object")
    name = body.get("signature_name")
    if name is not None and not isinstance(name, str):
        raise InvalidArgument("JSON Value: signature_name not formatted correctly. 'signature_name' "
                              "key must be a string value.")
    return body


@bp.route("/v1/models", methods=["GET", "POST"])
@bp.route("/v1/models/<path:rest>", methods=["GET", "POST"])
def dispatch(rest: str = "") -> Response:
    path = "/v1/models" + (f"/{rest}" if rest else "")
    method = request.method
    post = _POST_PATH.fullmatch(path) if method == "POST" else None
    get = _GET_PATH.fullmatch(path) if method == "GET" else None
    if post is None and get is None:
        raise InvalidArgument(f"Malformed request: {method} {path}")
    emu = _emu()
    caller = request_caller()
    project = emu.settings.default_project
    if get is not None:
        model, number, label, sub = get.group(1), _number(get.group(2)), get.group(3), get.group(4)
        if not model:
            raise InvalidArgument("Missing model name in request.")
        if sub:
            version, predictor = versions.resolve(emu, caller, project, model, number, label,
                                                  "ml.models.get")
            return json_response(tfserving_metadata.metadata(model, version, predictor))
        return json_response(versions.model_status(emu, caller, project, model, number, label))
    assert post is not None
    model, number, label, verb = post.group(1), _number(post.group(2)), post.group(3), post.group(4)
    body = _body()
    version, predictor = versions.resolve(emu, caller, project, model, number, label,
                                          "ml.models.predict")
    if verb.lower() == "predict":
        return json_response(_predict(predictor, body))
    return json_response(_classify_regress(predictor, body, verb.lower()))


def _predict(predictor: Any, body: dict[str, Any]) -> dict[str, Any]:
    has_rows, has_columns = "instances" in body, "inputs" in body
    if has_rows and has_columns:
        raise InvalidArgument("Not formatted correctly expecting only one of 'inputs' or 'instances' "
                              "keys to exist")
    if not has_rows and not has_columns:
        raise InvalidArgument("Missing 'inputs' or 'instances' key")
    if has_rows:
        instances = body["instances"]
        if not isinstance(instances, list):
            raise InvalidArgument("Expecting 'instances' to be an list/array")
        if not instances:
            raise InvalidArgument("No values in 'instances' array")
    signature_name = body.get("signature_name")
    if isinstance(predictor, TensorFlowPredictor):
        sig = predictor.select(signature_name)
        dtypes = {name: info.dtype for name, info in sig.inputs.items()}
        columns = (json_tensor.rows_to_columns(body["instances"], dtypes) if has_rows
                   else json_tensor.inputs_to_columns(body["inputs"], dtypes))
        outputs = predictor.predict_tensors(columns, sig.name)
        if has_rows:
            return {"predictions": json_tensor.columns_to_rows(outputs)}
        return {"outputs": json_tensor.columns_json(outputs)}
    # Other frameworks have one input and one output: predict(instances), rows either way.
    tfserving_metadata.check_signature(predictor, signature_name)
    instances = body["instances"] if has_rows else tfserving_metadata.single_input(body["inputs"])
    predictions = predictor.predict(instances)
    if hasattr(predictions, "tolist"):
        predictions = predictions.tolist()
    elif not isinstance(predictions, (list, dict)):
        predictions = list(predictions)
    return {"predictions" if has_rows else "outputs": predictions}


def _classify_regress(predictor: Any, body: dict[str, Any], verb: str) -> dict[str, Any]:
    if "examples" not in body:
        raise InvalidArgument(f"When method is {verb}, key 'examples' is expected and was not found")
    examples = body["examples"]
    if not isinstance(examples, list):
        raise InvalidArgument("Expecting 'examples' value to be an list/array")
    if not examples:
        raise InvalidArgument("'examples' value is an empty array")
    context = json_example.example_features(body["context"]) if "context" in body else None
    features = [json_example.example_features(e) for e in examples]
    for index, example in enumerate(features):
        shared = sorted(set(example) & set(context or ()))
        if shared:
            raise InvalidArgument(f"Feature(s) {', '.join(shared)} of example {index} also appear in "
                                  "'context'; features in 'context' must not appear in examples.")
    if not isinstance(predictor, TensorFlowPredictor):
        raise InvalidArgument(f":{verb} needs a TensorFlow SavedModel with a tensorflow/serving/{verb} "
                              f"signature; this model's framework is {predictor.framework or 'custom'}.")
    name = body.get("signature_name")
    if verb == "classify":
        return {"results": [[list(pair) for pair in row]
                            for row in predictor.classify(features, context, name)]}
    return {"results": predictor.regress(features, context, name)}


def render_tfserving_error(exc: ApiError) -> Response:
    # The model's own complaint goes out bare, as TF Serving words it (no "Prediction failed: ").
    return error_json(exc, exc.detail if isinstance(exc, PredictionFailed) else None)


register_error_renderer(bp, render_tfserving_error, log)
