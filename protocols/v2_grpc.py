"""Open Inference Protocol V2 over gRPC: `inference.GRPCInferenceService` (protos/grpc_predict_v2.proto).

Spec: KServe docs/predict-api/v2/grpc_predict_v2.proto. ServerLive, ServerReady, ModelReady,
ServerMetadata, ModelMetadata and ModelInfer over the same dataplane as the REST routes
(protocols/v2.py). ModelInfer accepts typed `contents` or `raw_input_contents` (one entry per
input, never both) and always answers with `raw_output_contents`, as Triton does. Errors are gRPC
status codes named like the google.rpc codes (NOT_FOUND, INVALID_ARGUMENT, ...), with the same
messages as REST; ModelReady answers NOT_FOUND for an unknown model, as REST's 404 (KServe).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

import auth
from core.errors import ApiError, InvalidArgument
from core.payloads import Caller
from protocols import inference
from protocols.proto_modules import grpc_predict_v2_pb2 as pb
from protocols.proto_modules import grpc_predict_v2_pb2_grpc as pb_grpc
from protocols.tensor_binary import from_binary, to_binary
from protocols.tensors import BINARY_ONLY, Tensor, check_datatype, check_shape, from_flat
from protocols.v2_codec import InferRequest, RequestedOutput

if TYPE_CHECKING:
    from emulator import Emulator

#: V2 gRPC: the InferTensorContents field carrying each datatype's typed values.
V2_CONTENTS_FIELDS = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}

log = logging.getLogger("mlemu.v2.grpc")
F = TypeVar("F", bound=Callable[..., Any])


class InvocationHeaders:
    """gRPC invocation metadata with the case-insensitive `.get` that auth.identify expects."""

    def __init__(self, context: grpc.ServicerContext) -> None:
        self._items = {k.lower(): v for k, v in (context.invocation_metadata() or ())}

    def get(self, key: str, /) -> str | None:
        value = self._items.get(key.lower())
        return value.decode() if isinstance(value, bytes) else value


def abort(context: grpc.ServicerContext, exc: ApiError) -> None:
    exc = inference.v2_error(exc)
    context.abort(grpc.StatusCode[exc.code.name], exc.message)


def rpc(method: F) -> F:
    """ApiError -> its gRPC status; anything else -> INTERNAL without a traceback."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except ApiError as exc:
            abort(context, exc)
        except Exception:
            log.exception("%s failed unexpectedly", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, "Internal error encountered.")

    return wrapper  # type: ignore[return-value]


def parameter_value(param: Any) -> Any:
    choice = param.WhichOneof("parameter_choice")
    return getattr(param, choice) if choice else None


def _parameters(params: Any) -> dict[str, Any]:
    return {key: parameter_value(value) for key, value in params.items()}


def decode_grpc_infer(request: Any) -> InferRequest:
    """A ModelInferRequest message as the InferRequest the REST codec also produces."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise InvalidArgument(
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs."
        )
    if not request.inputs:
        raise InvalidArgument("The request has no inputs.")
    inputs: list[Tensor] = []
    for index, item in enumerate(request.inputs):
        where = f"input '{item.name}'"
        if not item.name:
            raise InvalidArgument(f"inputs[{index}] needs a name.")
        datatype = check_datatype(item.datatype, where)
        shape = check_shape(list(item.shape), where)
        if raw:
            if item.HasField("contents"):
                raise InvalidArgument(f"{where} has contents while raw_input_contents is used.")
            tensor = from_binary(item.name, datatype, shape, raw[index])
        elif datatype in BINARY_ONLY:
            raise InvalidArgument(f"{where}: {datatype} data must be sent in raw_input_contents.")
        else:
            values = getattr(item.contents, V2_CONTENTS_FIELDS[datatype])
            tensor = from_flat(item.name, datatype, shape, values)
        tensor.parameters = _parameters(item.parameters)
        inputs.append(tensor)
    if len({t.name for t in inputs}) != len(inputs):
        raise InvalidArgument("Input names must be unique.")
    outputs = [RequestedOutput(o.name, _parameters(o.parameters)) for o in request.outputs] or None
    return InferRequest(inputs=inputs, id=request.id, parameters=_parameters(request.parameters),
                        outputs=outputs)


class V2Servicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self, emu: Emulator) -> None:
        self.emu = emu

    def _caller(self, context: grpc.ServicerContext) -> Caller:
        return auth.identify(self.emu, InvocationHeaders(context))

    @rpc
    def ServerLive(self, request: Any, context: grpc.ServicerContext) -> Any:
        return pb.ServerLiveResponse(live=True)

    @rpc
    def ServerReady(self, request: Any, context: grpc.ServicerContext) -> Any:
        return pb.ServerReadyResponse(ready=inference.server_ready(self.emu))

    @rpc
    def ModelReady(self, request: Any, context: grpc.ServicerContext) -> Any:
        ready = inference.model_ready(self.emu, self._caller(context), request.name,
                                      request.version)
        return pb.ModelReadyResponse(ready=ready)

    @rpc
    def ServerMetadata(self, request: Any, context: grpc.ServicerContext) -> Any:
        auth.require_authenticated(self.emu, self._caller(context))
        return pb.ServerMetadataResponse(name=inference.SERVER_NAME, version=inference.SERVER_VERSION,
                                         extensions=inference.EXTENSIONS)

    @rpc
    def ModelMetadata(self, request: Any, context: grpc.ServicerContext) -> Any:
        meta = inference.metadata(self.emu, self._caller(context), request.name, request.version)
        tensor = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=meta["name"], versions=meta["versions"], platform=meta["platform"],
            inputs=[tensor(**spec) for spec in meta["inputs"]],
            outputs=[tensor(**spec) for spec in meta["outputs"]],
        )

    @rpc
    def ModelInfer(self, request: Any, context: grpc.ServicerContext) -> Any:
        # The model and permission first: the tensors are decoded for callers who may
        # predict with a model that exists, never before.
        served = inference.serve(self.emu, self._caller(context), request.model_name,
                                 request.model_version)
        req = decode_grpc_infer(request)
        outputs = inference.run_tensors(served, req.inputs, req.parameters, req.output_names)
        outputs = inference.select_outputs(outputs, req.output_names)
        return pb.ModelInferResponse(
            model_name=request.model_name, model_version=served.version_id, id=request.id,
            outputs=[pb.ModelInferResponse.InferOutputTensor(name=t.name, datatype=t.datatype,
                                                              shape=t.shape) for t in outputs],
            raw_output_contents=[to_binary(t) for t in outputs],
        )
