"""grps over HTTP (NetEase-Media/grps RESTful interface, docs/2_Interface.md).

Routes (GET or POST unless noted):
  /grps/v1/health/online | offline      take the server in / out of service (starts offline)
  /grps/v1/health/live                  200 while the process serves
  /grps/v1/health/ready                 200 when online and the models are loaded, else 503
  POST /grps/v1/infer/predict           GrpsMessage as proto3 JSON (`application/json`), or the
                                        raw bytes of `bin_data` (`application/octet-stream`)
  /grps/v1/metadata/server              YAML in str_data
  POST /grps/v1/metadata/model          {"str_data": "name[-version]"} -> YAML in str_data

Every JSON answer carries `{"status": {"code", "msg", "status": "SUCCESS"|"FAILURE"}}` and the HTTP
status equals `status.code`. The predict Content-Type must be exactly `application/json` or
`application/octet-stream` (as grps checks it). Query parameters: `model=name-version` (a `model`
in the JSON body wins), `return-ndarray=true` (the first output as a nested `ndarray` list),
`streaming=true` (chunked transfer, one JSON GrpsMessage per chunk, or raw bytes for bin_data).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, current_app, request
from google.protobuf import json_format

import auth
import dataplane
from core import wirejson
from core.errors import ApiError, Internal, InvalidArgument, Unavailable
from core.payloads import Caller
from protocols import grps_state as grps
from protocols import inference
from protocols.grps_messages import (
    GrpsMessage,
    Prediction,
    failure,
    first_tensor_values,
    grps_pb2,
    ndarray_to_gtensors,
    ok,
)
from web.handlers import register_error_renderer
from web.http import decode_json, read_body, request_caller

if TYPE_CHECKING:
    from emulator import Emulator

log = logging.getLogger("mlemu.grps")
bp = Blueprint("grps", __name__, url_prefix="/grps/v1")
CONTENT_TYPES = ("application/json", "application/octet-stream")
_BOTH = ["GET", "POST"]


def _context() -> tuple[Emulator, Caller]:
    return current_app.extensions["mlemu"], request_caller()


def to_json(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def respond(message: Any) -> Response:
    status = message.status.code or 200
    return Response(wirejson.dumps(to_json(message)), status=status, mimetype="application/json")


def grps_error_response(exc: ApiError) -> Response:
    """grps's error shape; also used by the app's fallbacks for unknown /grps/ routes."""
    response = respond(failure(exc))
    response.headers.extend(exc.headers)
    return response


def _flag(name: str) -> bool:
    return request.args.get(name, "").lower() == "true"


@bp.route("/health/online", methods=_BOTH)
def online() -> Response:
    grps.set_online(*_context(), True)
    return respond(ok())


@bp.route("/health/offline", methods=_BOTH)
def offline() -> Response:
    grps.set_online(*_context(), False)
    return respond(ok())


@bp.route("/health/live", methods=_BOTH)
def live() -> Response:
    return respond(ok())


@bp.route("/health/ready", methods=_BOTH)
def ready() -> Response:
    if not grps.is_ready(current_app.extensions["mlemu"]):
        raise Unavailable("Service Unavailable")
    return respond(ok())


@bp.route("/metadata/server", methods=_BOTH)
def server_metadata() -> Response:
    emu, caller = _context()
    return respond(ok(GrpsMessage(str_data=grps.server_metadata(emu, caller))))


@bp.post("/metadata/model")
def model_metadata() -> Response:
    emu, caller = _context()
    # Authentication before the body (the model it names is authorized once it is read).
    auth.require_identity_unless_public(emu, caller, f"projects/{emu.settings.default_project}")
    body = decode_json(read_body(emu.settings.max_message_bytes))
    if not isinstance(body, dict):
        raise InvalidArgument("The body must be a JSON object like {\"str_data\": \"model_name\"}.")
    selector = body.get("str_data") or body.get("model") or request.args.get("model") or ""
    if not isinstance(selector, str):
        raise InvalidArgument("str_data must be the model's name (a string).")
    return respond(ok(GrpsMessage(str_data=grps.model_metadata(emu, caller, selector))))


def parse_predict_body(content_type: str | None, body: bytes) -> Any:
    """A GrpsMessage from a predict body; `ndarray` becomes one FP32 gtensor, as grps does."""
    if content_type is None:
        raise InvalidArgument("No content type in headers.")
    if content_type not in CONTENT_TYPES:
        raise InvalidArgument(
            f"Unsupported content type {content_type!r}: use exactly application/json, or "
            "application/octet-stream for bin_data.", http_status=415)
    if not body:
        raise InvalidArgument("The http body is empty.")
    if content_type == "application/octet-stream":
        return GrpsMessage(bin_data=body)
    data = decode_json(body)
    if not isinstance(data, dict):
        raise InvalidArgument("The body must be a JSON GrpsMessage object.")
    if "bin_data" in data:
        raise InvalidArgument("bin_data should use application/octet-stream format.")
    ndarray = data.pop("ndarray", None)
    _check_dtypes(data)
    try:
        message = json_format.ParseDict(data, GrpsMessage())
        if ndarray is not None:
            message.gtensors.CopyFrom(ndarray_to_gtensors(ndarray))
    except (json_format.ParseError, ValueError, OverflowError, TypeError) as exc:
        # protobuf's parser and numpy raise these for values they cannot hold (an enum number
        # with no name, Infinity for an enum, a 400-digit number).
        raise InvalidArgument(f"Invalid GrpsMessage JSON: {exc}") from None
    return message


def _check_dtypes(data: dict[str, Any]) -> None:
    """An unknown dtype name, answered with the names grps knows (protobuf's own parse error
    names the bad value only)."""
    gtensors = data.get("gtensors")
    tensors = gtensors.get("tensors") if isinstance(gtensors, dict) else None
    for index, tensor in enumerate(tensors if isinstance(tensors, list) else []):
        dtype = tensor.get("dtype") if isinstance(tensor, dict) else None
        known = (dtype in grps_pb2.DataType.keys() if isinstance(dtype, str)  # noqa: SIM118 - an EnumTypeWrapper
                 else dtype is None or (type(dtype) is int and dtype in grps_pb2.DataType.values()))
        if not known:
            raise InvalidArgument(
                f"gtensors[{index}]: unknown dtype {dtype!r}; expected one of "
                f"{', '.join(grps_pb2.DataType.keys()[1:])}.")


@bp.post("/infer/predict")
def predict() -> Response:
    emu, caller = _context()
    streaming, as_ndarray = _flag("streaming"), _flag("return-ndarray")
    if streaming and as_ndarray:
        raise InvalidArgument("Streaming and return-ndarray are not supported at the same time.")
    content_type = request.headers.get("Content-Type")
    selector = request.args.get("model")
    if selector:  # what can be checked before the body is read (the body may name the model)
        dataplane.admit(emu, caller, inference.model_ref(emu, *grps.split_model(selector)))
    else:
        auth.require_identity_unless_public(emu, caller, f"projects/{emu.settings.default_project}")
    message = parse_predict_body(content_type, read_body(emu.settings.max_message_bytes))
    call = Prediction(emu, caller, message, request.args.get("model"))
    if streaming:
        return Response(_chunks(call), mimetype="application/octet-stream")
    answer = call.message()
    if answer.WhichOneof("data_oneof") == "bin_data":
        return Response(answer.bin_data, mimetype="application/octet-stream")
    if as_ndarray:
        body = to_json(answer)
        body.pop("gtensors", None)
        body["ndarray"] = first_tensor_values(answer)
        return Response(wirejson.dumps(body), mimetype="application/json")
    return respond(answer)


def _chunks(call: Prediction) -> Iterator[bytes]:
    try:
        for message in call.stream():
            if message.WhichOneof("data_oneof") == "bin_data":
                yield message.bin_data
            else:
                yield wirejson.dumps(to_json(message))
    except ApiError as exc:
        yield wirejson.dumps(to_json(failure(exc)))
    except Exception:
        log.exception("grps streaming predict failed")
        yield wirejson.dumps(to_json(failure(Internal("Internal error encountered."))))


register_error_renderer(bp, grps_error_response, log)
