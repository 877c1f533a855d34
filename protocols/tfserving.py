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
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import numpy as np
from flask import Blueprint, Response, current_app, request
from werkzeug.routing import PathConverter

import dataplane
from core.errors import ApiError, InvalidArgument, PredictionFailed
from predictors import json_batch, json_example, json_tensor
from predictors.rapidjson_writer import debug_string
from predictors.tensorflow import DEFAULT_SIGNATURE, INIT_OP_SIGNATURE, TensorFlowPredictor
from protocols import tfserving_json as writer
from protocols import tfserving_metadata, tfserving_objects, wirearray
from protocols import tfserving_versions as versions
from protocols.tfserving_parse import loads_object
from web.handlers import register_error_renderer
from web.http import read_body, request_caller

log = logging.getLogger("mlemu.tfserving")
bp = Blueprint("tfserving", __name__)

# tensorflow_serving/model_servers/http_rest_api_util.cc: kPredictionApiGegex, kModelStatusApiRegex
_POST_PATH = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)",
    re.IGNORECASE)
_GET_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?",
    re.IGNORECASE)
#: TF Serving answers every /v1/ path (http_rest_api_util.h kHTTPRestApiHandlerPathRegex) and
#: every method; what its patterns do not match is "Malformed request" (http_rest_api_handler.cc).
_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH"]


def _emu() -> Any:
    return current_app.extensions["mlemu"]


def _number(text: str | None) -> int | None:
    if not text:
        return None
    number = int(text)
    if number >= 2 ** 63:
        raise InvalidArgument(f"Failed to convert version: {text} to numeric.")
    return number


def _body(data: bytes) -> tuple[dict[str, Any], bool]:
    """The JSON object body (json_tensor.cc ParseJson, then FillSignature's check), and whether
    it may hold true/false (when not, numbers take numpy's fast conversion)."""
    body = loads_object(data)
    name = body.get("signature_name")
    if name is not None and not isinstance(name, str):
        raise InvalidArgument(f"JSON Value: {debug_string(body)} not formatted correctly. "
                              "'signature_name' key must be a string value.")
    return body, b"true" in data or b"false" in data


def _format_error(body: dict[str, Any], message: str) -> InvalidArgument:
    """json_tensor.cc FormatError: the whole request body quoted before the complaint."""
    return InvalidArgument(f"JSON Value: {debug_string(body)} {message}")


def _status_line(code: int) -> str | int:
    """`404 Not Found`, as TF Serving's libevent server words it (werkzeug would say NOT FOUND)."""
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return code


def _bytes(body: bytes) -> Response:
    return Response(body, status=200, mimetype="application/json")


def _other_v1_converter(claimed: list[str]) -> type[PathConverter]:
    """A /v1/ path that no other service claims: not under /v1/projects (ml v1's own 404 and 405
    rules apply there) nor one of `claimed` (e.g. Vertex AI's routes, which keep their 405)."""
    exact = "".join(f"|{re.escape(path.removeprefix('/v1/'))}$" for path in claimed)

    class OtherV1(PathConverter):
        regex = rf"(?!projects(?:/|:|$){exact})[^/].*?"

    return OtherV1


def _register_converter(state: Any) -> None:
    settings = state.app.extensions["mlemu"].settings
    vertex = settings.vertex
    claimed = [vertex.health_route, vertex.predict_route] if vertex is not None else []
    state.app.url_map.converters["tfs_other_v1"] = _other_v1_converter(claimed)


bp.record_once(_register_converter)


@bp.route("/v1/<tfs_other_v1:rest>", methods=_METHODS)
def other_v1(rest: str) -> Response:
    """A /v1/ path no route claims: TF Serving's 400 (ml v1 paths are left to ml v1's rules)."""
    raise InvalidArgument(f"Malformed request: {request.method} /v1/{rest}")


@bp.route("/v1/models", methods=_METHODS)
@bp.route("/v1/models/<path:rest>", methods=_METHODS)
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
            return _bytes(tfserving_metadata.metadata(model, version, predictor))
        status = versions.model_status(emu, caller, project, model, number, label)
        return _bytes(writer.proto_text(status).encode())
    assert post is not None
    model, number, label, verb = post.group(1), _number(post.group(2)), post.group(3), post.group(4)
    versions.admit(emu, caller, project, model, number, label, "ml.models.predict")
    data = read_body(emu.settings.max_request_bytes)

    def resolve() -> dataplane.Served:
        return versions.serve(emu, caller, project, model, number, label)

    if verb.lower() == "predict":
        found = wirearray.keyed_array(data, ("instances", "inputs"))
        if found is not None:  # a large body of plain number rows, parsed straight into an array
            return _bytes(_predict_array(resolve(), found[1], data, found[0] == "instances"))
    body, bools = _body(data)  # a body that does not parse fails before the model is looked up
    if verb.lower() == "predict":
        return _bytes(_predict(resolve(), body, bools))
    return _bytes(_classify_regress(resolve, body, verb.lower()))


def _tensorflow_inputs(predictor: TensorFlowPredictor, name: str | None) -> Any:
    """http_rest_api_handler.cc GetInfoMap: the signature's inputs (no fallback signature)."""
    wanted = name or DEFAULT_SIGNATURE
    sig = predictor.signatures.get(wanted)
    if sig is None or wanted == INIT_OP_SIGNATURE:
        raise InvalidArgument(f'Serving signature name: "{wanted}" not found in signature def')
    if not sig.inputs:
        raise InvalidArgument(f"Failed to get input map for signature: {name or 'DEFAULT'}")
    return sig


def _predict(served: dataplane.Served, body: dict[str, Any], bools: bool) -> bytes:
    """json_tensor.cc FillPredictRequestFromJson, then the run, then MakeJsonFromTensors."""
    predictor = served.predictor
    signature_name = body.get("signature_name")
    sig = _tensorflow_inputs(predictor, signature_name) if isinstance(predictor, TensorFlowPredictor) \
        else None
    has_rows, has_columns = "instances" in body, "inputs" in body
    if has_rows and has_columns:
        raise _format_error(body, "Not formatted correctly expecting only one of 'inputs' or "
                                  "'instances' keys to exist ")
    if not has_rows and not has_columns:
        raise InvalidArgument("Missing 'inputs' or 'instances' key")
    if has_rows:
        if not isinstance(body["instances"], list):
            raise _format_error(body, "Expecting 'instances' to be an list/array")
        if not body["instances"]:
            raise _format_error(body, "No values in 'instances' array")
    if sig is not None:
        dtypes = {name: info.dtype_name for name, info in sig.inputs.items()}
        columns = (json_tensor.rows_to_columns(body["instances"], dtypes, bools) if has_rows
                   else json_tensor.inputs_to_columns(body["inputs"], dtypes, bools))
        outputs = served.predict_tensors(columns, sig.name)
        return writer.predict_rows(outputs) if has_rows else writer.predict_columns(outputs)
    # Other frameworks have one input: predict(instances), rows either way; the answer in
    # TensorFlow's layout (protocols/tfserving_objects.py).
    tfserving_metadata.check_signature(predictor, signature_name)
    instances = body["instances"] if has_rows else tfserving_metadata.single_input(body["inputs"])
    return tfserving_objects.predict_body(served.predict(instances), has_rows)


def _predict_array(served: dataplane.Served, array: np.ndarray, data: bytes,
                   has_rows: bool) -> bytes:
    """_predict of `{"instances" (or "inputs"): [[number, ...], ...]}`, decoded by wirearray: a
    TensorFlow signature with one float input converts the array as json_tensor would convert
    the lists (rows: predictors/json_batch.py, which declines what it cannot convert exactly;
    columns: numpy's conversion of the whole value, json_tensor.to_array's own); anything else
    takes the general path."""
    predictor = served.predictor
    if isinstance(predictor, TensorFlowPredictor):
        sig = _tensorflow_inputs(predictor, None)  # such a body names no signature
        (name, info), *others = sig.inputs.items()
        if not others and info.dtype_name in json_batch.FLOAT_TYPES:
            tensor = json_batch.stacked(array, info.dtype_name, False) if has_rows else \
                json_tensor.to_array(array, info.dtype_name, False)[0]
            if tensor is not None:
                outputs = served.predict_tensors({name: tensor}, sig.name)
                return writer.predict_rows(outputs) if has_rows else writer.predict_columns(outputs)
    if has_rows:
        return _predict(served, {"instances": wirearray.rows(data, array)}, False)
    body, bools = _body(data)
    return _predict(served, body, bools)


def _classify_regress(resolve: Callable[[], dataplane.Served], body: dict[str, Any],
                      verb: str) -> bytes:
    """json_tensor.cc FillClassifyRegressRequestFromJson, then the servable and its signature."""
    context = json_example.example_features(body["context"]) if "context" in body else None
    if "examples" not in body:
        # The source words this for both verbs ("When method is classify, ...").
        raise _format_error(body, "When method is classify, key 'examples' is expected and was not "
                                  "found")
    examples = body["examples"]
    if not isinstance(examples, list):
        raise _format_error(body, "Expecting 'examples' value to be an list/array")
    if not examples:
        raise _format_error(body, "'examples' value is an empty array")
    features = [json_example.example_features(e) for e in examples]
    served = resolve()
    predictor = served.predictor
    if not isinstance(predictor, TensorFlowPredictor):
        raise InvalidArgument(f":{verb} needs a TensorFlow SavedModel with a tensorflow/serving/{verb} "
                              f"signature; this model's framework is {predictor.framework or 'custom'}.")
    name = body.get("signature_name")
    # What the request log records: the request's own keys, as it sent them.
    logged: dict[str, Any] = {key: body[key] for key in ("context", "signature_name") if key in body}
    if verb == "classify":
        return writer.classify_body(served.call(
            lambda: predictor.classify(features, context, name), examples, logged))
    return writer.regress_body(served.call(
        lambda: predictor.regress(features, context, name), examples, logged))


def render_tfserving_error(exc: ApiError) -> Response:
    # The model's own complaint goes out bare, as TF Serving words it (no "Prediction failed: "),
    # in MakeJsonFromStatus' bytes.
    message = exc.detail if isinstance(exc, PredictionFailed) else exc.message
    response = Response(writer.error_body(message), status=_status_line(exc.http_status),
                        mimetype="application/json")
    response.headers.extend(exc.headers)
    return response


register_error_renderer(bp, render_tfserving_error, log)
