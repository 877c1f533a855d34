"""Vertex AI `google.cloud.aiplatform.v1.PredictionService` over gRPC: Predict, RawPredict and
Explain, for the GAPIC clients (Python's PredictionServiceClient, and the Go and Java SDKs, which
default to gRPC) over an insecure channel to mlemu's gRPC port.

The messages are the protobuf descriptors google-cloud-aiplatform ships
(google/cloud/aiplatform_v1/types/prediction_service.py, from googleapis/googleapis
google/cloud/aiplatform/v1/prediction_service.proto); they are imported on the service's first
call, and the service is left out (with a log line) where that package is not installed.
Requests go through the same use cases as REST (dataplane/vertex.py). Errors are gRPC statuses
with the error's canonical code and message; RawPredict names the deployed model in its initial
metadata (x-vertex-ai-* keys, as rawPredict's REST headers do).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

import auth
from core import wirejson
from core.errors import ApiError, InvalidArgument
from core.payloads import PredictRequest
from dataplane import vertex as vertex_dataplane
from predictors.container import container_error
from protocols.aiplatform import encode_predictions
from protocols.v2_grpc import InvocationHeaders
from protocols.vertex import decode_vertex_predict

if TYPE_CHECKING:
    from emulator import Emulator

log = logging.getLogger("mlemu.vertex.grpc")
SERVICE = "google.cloud.aiplatform.v1.PredictionService"


def _rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """ApiError -> its gRPC status; anything else -> INTERNAL without a traceback."""
    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except ApiError as exc:
            context.abort(grpc.StatusCode[exc.code.name], exc.message)
        except Exception:
            log.exception("Vertex AI gRPC call failed unexpectedly")
            context.abort(grpc.StatusCode.INTERNAL, "Internal error encountered.")
    return wrapper


class VertexPredictionServicer:
    def __init__(self, emu: Emulator, types: Any) -> None:
        from google.protobuf import json_format

        self.emu, self.types, self.json_format = emu, types, json_format

    def _caller(self, context: grpc.ServicerContext) -> Any:
        return auth.identify(self.emu, InvocationHeaders(context))

    def _as_dict(self, message: Any) -> dict[str, Any]:
        return dict(self.json_format.MessageToDict(message))

    def _message(self, cls: Any, body: dict[str, Any]) -> Any:
        # Predictions pass through JSON once (NaN/Infinity as the REST answer writes them).
        return self.json_format.ParseDict(json.loads(wirejson.dumps(body)), cls())

    @_rpc
    def Predict(self, request: Any, context: grpc.ServicerContext) -> Any:
        caller = self._caller(context)
        vertex_dataplane.admit(self.emu, caller, request.endpoint)
        body = self._as_dict(request)
        req = decode_vertex_predict({k: body[k] for k in ("instances", "parameters") if k in body})
        target, result = vertex_dataplane.predict(self.emu, caller, request.endpoint, req)
        return self._message(self.types.PredictResponse, {
            "predictions": encode_predictions(result.predictions),
            **vertex_dataplane.identity(target)})

    @_rpc
    def RawPredict(self, request: Any, context: grpc.ServicerContext) -> Any:
        caller = self._caller(context)
        vertex_dataplane.admit(self.emu, caller, request.endpoint)
        target, predictor = vertex_dataplane.resolve(self.emu, caller, request.endpoint,
                                                     vertex_dataplane.PREDICT)
        forwarded = vertex_dataplane.forward_raw(self.emu, target, predictor,
                                                 request.http_body.data,
                                                 request.http_body.content_type)
        context.send_initial_metadata(tuple(
            (key.lower(), value) for key, value in vertex_dataplane.identity_headers(target).items()))
        answer = self.types.HttpBody()
        if forwarded is not None:  # a custom container: its body, or its error as a status
            status, content_type, data = forwarded
            if not 200 <= status < 300:
                raise container_error(status, data)
            answer.content_type, answer.data = content_type, data
            return answer
        try:
            body = wirejson.loads(request.http_body.data)
        except wirejson.DecodeError as exc:
            raise InvalidArgument(f"The model server takes a JSON body: {exc}") from None
        if not isinstance(body, dict) or not isinstance(body.get("instances"), list):
            raise InvalidArgument('The model server takes a JSON body {"instances": [...]}.')
        result = vertex_dataplane.predict_on(
            self.emu, target, predictor,
            PredictRequest(body["instances"], body.get("parameters") or {}))
        answer.content_type = "application/json"
        answer.data = wirejson.dumps({"predictions": encode_predictions(result.predictions)})
        return answer

    @_rpc
    def Explain(self, request: Any, context: grpc.ServicerContext) -> Any:
        caller = self._caller(context)
        vertex_dataplane.admit(self.emu, caller, request.endpoint, vertex_dataplane.EXPLAIN)
        body = self._as_dict(request)
        req = decode_vertex_predict({k: body[k] for k in ("instances", "parameters") if k in body})
        target, predictions, explanations = vertex_dataplane.explain(
            self.emu, caller, request.endpoint, req, body.get("deployedModelId") or None,
            body.get("explanationSpecOverride"))
        return self._message(self.types.ExplainResponse, {
            "explanations": explanations, "deployedModelId": target.deployed_model_id,
            "predictions": encode_predictions(predictions)})


class _Types:
    """The raw protobuf classes of the messages this service exchanges, imported on first use:
    every gunicorn worker runs the gRPC server (grpcserve/in_worker.py), and google-cloud-
    aiplatform's types, a large share of a worker's memory, are then held only by the workers
    that serve this service."""

    _NAMES = ("PredictRequest", "PredictResponse", "RawPredictRequest", "ExplainRequest",
              "ExplainResponse")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        with self._lock:
            if self._loaded is None:
                from google.api import httpbody_pb2
                from google.cloud.aiplatform_v1.types import prediction_service

                loaded = {n: getattr(prediction_service, n).pb() for n in self._NAMES}
                self._loaded = {**loaded, "HttpBody": httpbody_pb2.HttpBody}
        return self._loaded[name]


class _Parse:
    """A request deserializer that loads its message class on the first call; `message_type`
    names the message (grpcserve/server.py reports a request that does not parse with it)."""

    def __init__(self, types: _Types, name: str, message_type: str) -> None:
        self.types, self.name, self.message_type = types, name, message_type

    def __call__(self, data: bytes) -> Any:
        return getattr(self.types, self.name).FromString(data)


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


def handlers(emu: Emulator) -> dict[str, grpc.RpcMethodHandler] | None:
    """The service's method handlers (None: google-cloud-aiplatform is not installed)."""
    if importlib.util.find_spec("google.cloud.aiplatform_v1") is None:
        log.info("google-cloud-aiplatform is not installed: Vertex AI's PredictionService is not "
                 "served over gRPC")
        return None
    types = _Types()
    servicer = VertexPredictionServicer(emu, types)

    def unary(behavior: Callable[..., Any], request: str, package: str) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=_Parse(types, request, f"{package}.{request}"),
            response_serializer=_serialize)

    vertex = "google.cloud.aiplatform.v1"
    return {"Predict": unary(servicer.Predict, "PredictRequest", vertex),
            "RawPredict": unary(servicer.RawPredict, "RawPredictRequest", vertex),
            "Explain": unary(servicer.Explain, "ExplainRequest", vertex)}
