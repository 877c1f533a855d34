"""grps GrpsMessage payloads <-> predictor calls, for the HTTP and gRPC adapters (no Flask).

Spec: NetEase-Media/grps apis/grps_apis/grps.proto and docs/2_Interface.md. How each payload kind
reaches an AI Platform predictor, and how the answer comes back (same kind as the request):

- `gtensors` (and HTTP's `ndarray`, one DT_FLOAT32 tensor): tensors, mapped to instances as in
  protocols/tensors.py (one tensor: its rows; several: one object per row keyed by name);
  predictions come back as `gtensors`;
- `str_data`: one instance, the string; `bin_data`: one instance, the bytes; `gmap`: one instance,
  an object merging the maps (s_b values as bytes). The answer is the single prediction: a string
  or bytes as is, an object as `gmap` (values typed by kind), anything else as JSON text;
- streaming: when a (custom) predictor returns an iterator, each item is one message, encoded as
  if it were the only prediction; otherwise the whole answer is one message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from core import wirejson
from core.errors import ApiError, InvalidArgument, ModelNotFound, PredictionFailed
from core.payloads import Caller
from protocols import grps_state as grps
from protocols import inference
from protocols.grps_tensors import GRPS_DTYPES, GRPS_OUTPUT_DTYPES, to_flat
from protocols.proto_modules import grps_pb2
from protocols.tensors import Tensor, check_shape, from_flat, from_predictions

if TYPE_CHECKING:
    from emulator import Emulator

GrpsMessage = grps_pb2.GrpsMessage
KINDS = ("gtensors", "str_data", "bin_data", "gmap")
_INT32 = (-(2**31), 2**31 - 1)


def status_message(code: int, msg: str, success: bool) -> Any:
    flag = grps_pb2.Status.SUCCESS if success else grps_pb2.Status.FAILURE
    return GrpsMessage(status=grps_pb2.Status(code=code, msg=msg, status=flag))


def ok(message: Any | None = None) -> Any:
    message = message if message is not None else GrpsMessage()
    message.status.CopyFrom(status_message(200, "OK", True).status)
    return message


def failure(exc: ApiError) -> Any:
    return status_message(exc.http_status, grps_words(exc), False)


def grps_words(exc: ApiError) -> str:
    """An error's message as grps says it. A missing model is "Not found model: name[-version]"
    (grps server/cpp_server/src/executor/executor.cc, Executor::Infer; grps prefixes
    "[ExecutorException] " and answers 500, where mlemu keeps 404: the caller named a model that
    is not there)."""
    if isinstance(exc, ModelNotFound):
        return f"Not found model: {exc.model}" + (f"-{exc.version}" if exc.version else "")
    return exc.message


def tensors_from_message(data: Any, input_names: tuple[str, ...] = ()) -> list[Tensor]:
    """The request's tensors. Unnamed tensors (HTTP's `ndarray` is one) stand for the model's
    inputs by position, as grps feeds them (server/cpp_server/src/model_infer/tf_inferer.cc,
    TfModelInferer::Infer: an empty name takes the signature's input at its index); tensors
    must all be named or all unnamed (tf_tensor_converter.cc, TfTensorConverter::PreProcess)."""
    named = [bool(item.name) for item in data.tensors]
    if any(named) and not all(named):
        raise InvalidArgument("gtensors tensors should all have name or all have no name(will use "
                              "default name).")
    if not any(named) and input_names and len(named) > len(input_names):
        raise InvalidArgument(f"Failed to infer model, error: input count not match, input count: "
                              f"{len(named)}, model input count: {len(input_names)}")
    tensors = []
    for index, item in enumerate(data.tensors):
        dtype = grps_pb2.DataType.Name(item.dtype)
        name = item.name or (input_names[index] if input_names else f"input-{index}")
        if dtype not in GRPS_DTYPES:
            raise InvalidArgument(f"gtensors[{index}] ('{name}'): unknown or missing dtype {dtype}.")
        datatype, field = GRPS_DTYPES[dtype]
        shape = check_shape(list(item.shape), f"gtensors[{index}] ('{name}')")
        tensors.append(from_flat(name, datatype, shape, getattr(item, field)))
    if not tensors:
        raise InvalidArgument("gtensors holds no tensors.")
    if len({t.name for t in tensors}) != len(tensors):
        raise InvalidArgument("gtensors: tensor names must be unique.")
    return tensors


def tensors_to_message(tensors: list[Tensor]) -> Any:
    message = GrpsMessage()
    for tensor in tensors:
        dtype = GRPS_OUTPUT_DTYPES[tensor.datatype]
        datatype, field = GRPS_DTYPES[dtype]
        item = message.gtensors.tensors.add(name=tensor.name, dtype=grps_pb2.DataType.Value(dtype),
                                            shape=tensor.shape)
        getattr(item, field).extend(to_flat(tensor, datatype))
    return message


def ndarray_to_gtensors(ndarray: Any) -> Any:
    """HTTP's `ndarray` (a nested list) as the one DT_FLOAT32 tensor it stands for."""
    try:
        array = np.asarray(ndarray, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"ndarray must be a rectangular array of numbers: {exc}") from None
    # grps's ndarray tensor has no name (grps_handler.cc, ParseNDArray): it is the first input.
    return tensors_to_message([Tensor("", "FP32", array)]).gtensors


def first_tensor_values(message: Any) -> Any:
    """`?return-ndarray=true`: the answer's one DT_FLOAT32 tensor as a nested list. grps
    converts nothing else: several tensors or another dtype are refused with its words
    (server/cpp_server/src/handler/grps_handler.cc, GenNDArrayFromGrpsMsg; grps answers them
    500, mlemu 400: the request asked for a layout the model's answer does not have)."""
    if not message.gtensors.tensors:
        raise InvalidArgument("return-ndarray needs a tensor answer (send gtensors or ndarray).")
    if len(message.gtensors.tensors) != 1:
        raise InvalidArgument("NDArray only support one tensor")
    first = message.gtensors.tensors[0]
    if first.dtype != grps_pb2.DataType.DT_FLOAT32:
        raise InvalidArgument("NDArray only support float32")
    return np.asarray(list(first.flat_float32), dtype=np.float32).reshape(
        tuple(first.shape)).tolist()


def map_to_instance(gmap: Any) -> dict[str, Any]:
    instance: dict[str, Any] = {}
    for field in ("s_s", "s_b", "s_i32", "s_i64", "s_f", "s_d"):
        instance.update(getattr(gmap, field))
    return instance


def value_to_map(value: Any) -> Any:
    message = GrpsMessage()
    gmap = message.gmap
    gmap.SetInParent()
    items = value.items() if isinstance(value, dict) else [("prediction", value)]
    for key, item in items:
        key = str(key)
        if isinstance(item, str):
            gmap.s_s[key] = item
        elif isinstance(item, bytes):
            gmap.s_b[key] = item
        elif isinstance(item, int) and not isinstance(item, bool) and _INT32[0] <= item <= _INT32[1]:
            gmap.s_i32[key] = item
        elif isinstance(item, int) and not isinstance(item, bool):
            gmap.s_i64[key] = item
        elif isinstance(item, float):
            gmap.s_d[key] = item
        else:  # bools, lists, objects, null: JSON text
            gmap.s_s[key] = wirejson.dumps(item).decode()
    return message


class Prediction:
    """One predict call: model resolved and input decoded up front, so errors come before any
    streamed output."""

    def __init__(self, emu: Emulator, caller: Caller, request: Any, fallback_model: str | None) -> None:
        name, version = grps.select_model(emu, request.model or fallback_model)
        self.served = inference.serve(emu, caller, name, version)
        self.predictor = self.served.predictor
        self.kind = request.WhichOneof("data_oneof")
        self.request_tensors = request.gtensors.tensors if self.kind == "gtensors" else ()
        if self.kind == "ndarray":
            raise InvalidArgument("ndarray is only for HTTP JSON requests; send gtensors.")
        if self.kind not in KINDS:
            raise InvalidArgument(
                "No data in the message: set one of str_data, bin_data, gtensors, gmap (or ndarray "
                "over HTTP)."
            )
        self.tensors: list[Tensor] = []
        self.instances: list[Any] = []
        if self.kind == "gtensors":
            self.tensors = tensors_from_message(request.gtensors, self._model_inputs())
        elif self.kind == "gmap":
            self.instances = [map_to_instance(request.gmap)]
        else:
            self.instances = [getattr(request, self.kind)]

    def _model_inputs(self) -> tuple[str, ...]:
        """The input names a tensor-native (TensorFlow) model feeds by, in signature order; a
        named tensor the model lacks is refused in grps's words (tf_inferer.cc, Infer)."""
        if not callable(getattr(self.predictor, "predict_tensors", None)):
            return ()
        inputs = tuple(spec.name for spec in self.predictor.signature().inputs)
        for item in self.request_tensors:
            if item.name and inputs and item.name not in inputs:
                raise InvalidArgument(f"Failed to infer model, error: input name {item.name} not "
                                      "defined in model")
        return inputs

    def encode(self, predictions: list[Any], item: int | None = None) -> Any:
        """The predictions as this request's kind of message. What cannot be encoded (an object
        JSON cannot hold) is named, with the streamed item's index, in a Prediction failed
        error: a stream's last chunk then says what went wrong instead of a bare 500."""
        try:
            return self._encode(predictions)
        except (TypeError, ValueError) as exc:
            which = f"item {item} of its stream" if item is not None else "its answer"
            raise PredictionFailed(f"The predictor's {which} cannot be sent as {self.kind}: "
                                   f"{exc}") from None

    def _encode(self, predictions: list[Any]) -> Any:
        if self.kind == "gtensors":
            declared = {t.name: t.datatype for t in self.predictor.signature().outputs}
            return tensors_to_message(from_predictions(predictions, declared))
        value = predictions[0] if len(predictions) == 1 else predictions
        if self.kind == "gmap":
            return value_to_map(value)
        if self.kind == "str_data":
            text = value if isinstance(value, str) else (
                value.decode(errors="replace") if isinstance(value, bytes)
                else wirejson.dumps(value).decode())
            return GrpsMessage(str_data=text)
        data = value if isinstance(value, bytes) else (
            value.encode() if isinstance(value, str) else wirejson.dumps(value))
        return GrpsMessage(bin_data=data)

    def _call(self) -> Any:
        """The predictor's raw answer; a tensor-native predictor answers output tensors."""
        if self.kind == "gtensors" and callable(getattr(self.predictor, "predict_tensors", None)):
            return _Outputs(inference.run_tensors(self.served, self.tensors, {}))
        instances = (inference.instances_for(self.predictor, self.tensors)
                     if self.kind == "gtensors" else self.instances)
        return self.served.predict(instances)

    def _encode_raw(self, raw: Any) -> Any:
        if isinstance(raw, _Outputs):
            return tensors_to_message(raw.tensors)
        return self.encode(inference.as_list(raw))

    def message(self) -> Any:
        """The whole answer as one message (an iterator's items are collected)."""
        return ok(self._encode_raw(self._call()))

    def stream(self) -> Iterator[Any]:
        """One message per item when the predictor returns an iterator, else one message."""
        raw = self._call()
        if not _is_stream(raw):
            yield ok(self._encode_raw(raw))
            return
        for index, item in enumerate(raw):
            yield ok(self.encode([item], index))


@dataclasses.dataclass
class _Outputs:
    tensors: list[Tensor]


def _is_stream(value: Any) -> bool:
    return isinstance(value, Iterator) and not isinstance(value, (list, tuple, dict, str, bytes))
