"""AI Platform Prediction online prediction (ml.googleapis.com/v1 `projects.predict` and
`projects.explain`).

Routes:
  POST /v1/projects/{project}/models/{model}:predict                     (default version)
  POST /v1/projects/{project}/models/{model}/versions/{version}:predict
  POST the same two paths with `:explain`: the same body, answered with `{"explanations": [...]}`
  (feature attributions, explainers/); Flask only, the fast path serves `:predict`.

Body `{"instances": [...], ...}`; every other top-level key is passed to a custom predictor as a
keyword argument (built-in frameworks refuse unknown keys). Success is `{"predictions": [...]}`.
A failure inside the model is HTTP 400 `{"error": "Prediction failed: ..."}`, as the real
service answers; resource and request errors use the Google error object.
Spec: https://cloud.google.com/ai-platform/prediction/docs/reference/rest/v1/projects/predict

Two entry points run the same steps: the Flask views, and `PredictFastPath`, a WSGI middleware
that serves plain requests to these routes before Flask's per-request machinery (see its
docstring); create_app installs it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from flask import Blueprint, Response, current_app
from werkzeug.datastructures import EnvironHeaders

import auth
import dataplane
from core.errors import ApiError, InvalidArgument, PredictionFailed
from core.payloads import Caller, ModelRef, NumericInstances, PredictRequest
from protocols import wirearray
from protocols.fastpath import FastPath, WSGIApp
from web.google import check_standard_params, google_error_response, google_json, google_json_response
from web.handlers import register_error_renderer
from web.http import client_gone, decode_json, read_body, read_limited, request_caller

if TYPE_CHECKING:
    from emulator import Emulator


log = logging.getLogger("mlemu.aiplatform")
bp = Blueprint("aiplatform", __name__)


def decode_ml_predict(body: Any) -> PredictRequest:
    """An ml v1 `:predict` body (parsed JSON): `instances` plus keyword arguments."""
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


def decode_ml_predict_body(data: bytes) -> PredictRequest:
    """A request body as a PredictRequest (both entry points).

    Large bodies of plain number rows are decoded straight into an array (wirearray.py); every
    other body, and every malformed one, goes through the general JSON decoder and its checks.
    """
    array = wirearray.instances_array(data)
    if array is not None:
        return PredictRequest(NumericInstances(array, functools.partial(wirearray.rows, data, array)))
    return decode_ml_predict(decode_json(data))


def encode_predictions(predictions: Any) -> Any:
    if isinstance(predictions, (list, dict, str, int, float, bool)) or predictions is None:
        return predictions
    if hasattr(predictions, "tolist"):
        return predictions.tolist()
    if isinstance(predictions, Iterable):  # a custom predictor may yield its predictions
        return list(predictions)
    return predictions


def ml_predictions(predictions: Any) -> list[Any]:
    """The `predictions` of an ml v1 answer. AI Platform took a list, or a numpy array through
    `tolist()`, and refused anything else (kubeflow/batch-predict kubeflow_batch_predict/
    prediction/prediction_lib.py, SklearnModel.postprocess: INVALID_OUTPUTS "Bad output type
    returned after running ..."; the custom prediction routines guide: predict "Returns: A list
    of outputs containing the prediction results. This list must be JSON serializable").
    A generator or other iterator (a custom predictor written to stream over grps) is listed:
    an mlemu extension, which the data plane's request log relies on too."""
    if isinstance(predictions, list):
        return predictions
    if isinstance(predictions, np.ndarray):
        return list(predictions.tolist())
    if isinstance(predictions, Iterator) and not isinstance(predictions, (str, bytes)):
        return list(predictions)
    raise PredictionFailed(
        f"Bad output type returned after running predict: {type(predictions).__name__}. The "
        "predict function should return either a numpy ndarray or a list.")


def ml_predict_body(predictions: list[Any], encode: Callable[[dict[str, Any]], Any]) -> Any:
    """`encode({"predictions": ...})`; what JSON cannot hold (bytes, sets, objects inside the
    list) is the model's failure, in this route's words, never a 500."""
    try:
        return encode({"predictions": predictions})
    except (TypeError, ValueError) as exc:
        raise PredictionFailed(f"The predictions are not JSON serializable: {exc}. The predict "
                               "function must return a list of JSON values.") from None


def _predictions(emu: Emulator, caller: Caller, ref: ModelRef, data: bytes) -> list[Any]:
    """The use case between the request body and the `predictions` value (both entry points)."""
    result = dataplane.predict(emu, caller, ref, decode_ml_predict_body(data))
    return ml_predictions(result.predictions)


def _predict(ref: ModelRef) -> Response:
    emu = current_app.extensions["mlemu"]
    caller = request_caller()
    check_standard_params()
    dataplane.admit(emu, caller, ref)
    data = read_body(emu.settings.max_request_bytes)
    return ml_predict_body(_predictions(emu, caller, ref, data),  # type: ignore[no-any-return]
                           lambda body: google_json_response(body, pretty_default=False))


def _explain(ref: ModelRef) -> Response:
    emu = current_app.extensions["mlemu"]
    caller = request_caller()
    check_standard_params()
    dataplane.admit(emu, caller, ref)  # who may explain, before the body's size or content
    req = decode_ml_predict_body(read_body(emu.settings.max_request_bytes))
    explanations = dataplane.explain(emu, caller, ref, req, stop=client_gone())
    return google_json_response({"explanations": explanations})


def _route(verb: str, view: Callable[[ModelRef], Response]) -> None:
    """POST `:verb` on a model (its default version) and on a version, both served by `view`."""
    def on_name(project: str, model: str, version: str | None = None) -> Response:
        return view(ModelRef(project, model, version))

    bp.add_url_rule(f"/v1/projects/<project>/models/<model>:{verb}", f"{verb}_model", on_name,
                    methods=["POST"])
    bp.add_url_rule(f"/v1/projects/<project>/models/<model>/versions/<version>:{verb}",
                    f"{verb}_version", on_name, methods=["POST"])


_route("predict", _predict)
_route("explain", _explain)


def render_ml_predict_error(exc: ApiError) -> Response:
    """This route's error shapes: a model's failure as AI Platform words it, else Google's."""
    if isinstance(exc, PredictionFailed):
        return Response(google_json({"error": exc.message}, pretty=False), exc.http_status,
                        mimetype="application/json")
    return google_error_response(exc)


register_error_renderer(bp, render_ml_predict_error, log)


#: The plain :predict paths the fast path serves; names outside [A-Za-z0-9_-] (which AI
#: Platform does not allow anyway) go through Flask's router, which has the last word on them.
_PREDICT_PATH = re.compile(r"/v1/projects/([\w-]+)/models/([\w-]+)(?:/versions/([\w-]+))?:predict",
                           re.ASCII)


class PredictFastPath(FastPath[ModelRef]):
    """Plain ml v1 `:predict` requests served in front of Flask (protocols/fastpath.py).

    A request qualifies when it is a POST with a Content-Length, a path `_PREDICT_PATH` matches,
    no query string other than `alt=json` (what Google's client library sends) and no Vertex AI
    container routes are configured that could shadow it. It then runs the same steps as the
    Flask view (identify the caller, bounded body, decode, `_predictions`, this route's error
    shapes); anything else (`fields`, `prettyPrint`, chunked bodies, other methods, unusual
    names) goes to Flask unchanged. tests/api/test_predict_fastpath.py checks that both answer
    alike, byte for byte.
    """

    log = log

    def route(self, environ: dict[str, Any]) -> ModelRef | None:
        if not self.enabled or environ.get("REQUEST_METHOD") != "POST":
            return None
        if environ.get("QUERY_STRING", "") not in ("", "alt=json"):
            return None
        if not str(environ.get("CONTENT_LENGTH", "")).isdigit():
            return None
        match = _PREDICT_PATH.fullmatch(environ.get("PATH_INFO", ""))
        if match is None:
            return None
        return ModelRef(*match.groups())  # type: ignore[arg-type]

    def serve(self, environ: dict[str, Any], target: ModelRef) -> bytes:
        emu = self.emu
        caller = auth.identify(emu, EnvironHeaders(environ))
        dataplane.admit(emu, caller, target)
        data = read_limited(environ["wsgi.input"], int(environ["CONTENT_LENGTH"]),
                            emu.settings.max_request_bytes)
        return ml_predict_body(_predictions(emu, caller, target, data),  # type: ignore[no-any-return]
                               lambda body: google_json(body, pretty=False))

    def render_error(self, exc: ApiError) -> WSGIApp:
        return render_ml_predict_error(exc)  # type: ignore[no-any-return]
