"""Open Inference Protocol V2 REST bodies <-> decoded requests and output tensors (no Flask).

Spec: KServe "V2 inference protocol" REST (docs/predict-api/v2/required_api.md) and its binary
tensor data extension (Triton's docs/protocol/extension_binary_data.md):

- request JSON `{"id"?, "parameters"?, "inputs": [{name, shape, datatype, parameters?, data?}],
  "outputs"?: [{name, parameters?}]}`; `data` may be nested or flat (row-major);
- binary inputs: an input's `parameters.binary_data_size` says its tensor follows the JSON header,
  in input order; the header's length is the `Inference-Header-Content-Length` HTTP header;
- binary outputs: per output `parameters.binary_data: true`, or `binary_data_output: true` in the
  request parameters for every output not saying otherwise; such an output carries
  `parameters.binary_data_size` instead of `data` and its bytes follow the JSON header.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core import wirejson
from core.errors import InvalidArgument
from protocols.tensor_binary import from_binary, to_binary
from protocols.tensors import Tensor, check_datatype, check_shape, from_values, to_values


@dataclasses.dataclass
class RequestedOutput:
    name: str
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class InferRequest:
    """A decoded V2 inference request (REST or gRPC)."""

    inputs: list[Tensor]
    id: str | None = None
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    outputs: list[RequestedOutput] | None = None

    @property
    def output_names(self) -> list[str] | None:
        return [o.name for o in self.outputs] if self.outputs else None


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be a JSON object, got {type(value).__name__}.")
    return value


def split_body(body: bytes, header_length: str | None) -> tuple[Any, bytes]:
    """The JSON header (parsed) and the binary data that follows it."""
    if header_length is None:
        json_part, binary = body, b""
    else:
        try:
            length = int(header_length)
        except ValueError:
            raise InvalidArgument(
                f"Inference-Header-Content-Length must be an integer, got {header_length!r}."
            ) from None
        if not 0 <= length <= len(body):
            raise InvalidArgument(
                f"Inference-Header-Content-Length is {length} but the body has {len(body)} bytes."
            )
        json_part, binary = body[:length], body[length:]
    if not json_part.strip():
        raise InvalidArgument("The request body is empty: expected a JSON inference request.")
    try:
        return wirejson.loads(json_part), binary
    except wirejson.DecodeError as exc:
        raise InvalidArgument(f"Invalid JSON in the inference request: {exc}") from None


def decode_rest_infer(header: Any, binary: bytes) -> InferRequest:
    if not isinstance(header, dict):
        raise InvalidArgument("The inference request must be a JSON object with an 'inputs' list.")
    request_id = header.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidArgument(f"'id' must be a string, got {type(request_id).__name__}.")
    raw_inputs = header.get("inputs")
    if not isinstance(raw_inputs, list) or not raw_inputs:
        raise InvalidArgument("'inputs' must be a non-empty list of input tensors.")
    offset = 0
    inputs: list[Tensor] = []
    for index, item in enumerate(raw_inputs):
        if not isinstance(item, dict):
            raise InvalidArgument(f"inputs[{index}] must be a JSON object.")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"inputs[{index}] needs a non-empty string 'name'.")
        where = f"input '{name}'"
        datatype = check_datatype(item.get("datatype"), where)
        shape = check_shape(item.get("shape"), where)
        params = _object(item.get("parameters"), f"{where} parameters")
        size = params.get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidArgument(f"{where}: binary_data_size must be a non-negative integer.")
            if "data" in item:
                raise InvalidArgument(f"{where} has both 'data' and binary_data_size.")
            if offset + size > len(binary):
                raise InvalidArgument(
                    f"{where}: binary_data_size is {size} but only {len(binary) - offset} bytes of "
                    "binary data remain in the body (truncated?)."
                )
            tensor = from_binary(name, datatype, shape, binary[offset:offset + size])
            offset += size
        elif "data" in item:
            tensor = from_values(name, datatype, shape, item["data"])
        else:
            raise InvalidArgument(f"{where} has neither 'data' nor parameters.binary_data_size.")
        tensor.parameters = {k: v for k, v in params.items() if k != "binary_data_size"}
        inputs.append(tensor)
    if offset != len(binary):
        raise InvalidArgument(
            f"The body has {len(binary) - offset} bytes of binary data that no input claims."
        )
    names = [t.name for t in inputs]
    if len(set(names)) != len(names):
        raise InvalidArgument("Input names must be unique.")
    outputs = None
    if header.get("outputs") is not None:
        if not isinstance(header["outputs"], list):
            raise InvalidArgument("'outputs' must be a list of {\"name\": ...} objects.")
        outputs = []
        for index, item in enumerate(header["outputs"]):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise InvalidArgument(f"outputs[{index}] must be an object with a string 'name'.")
            outputs.append(RequestedOutput(
                item["name"], _object(item.get("parameters"), f"outputs[{index}] parameters")))
    return InferRequest(inputs=inputs, id=request_id,
                        parameters=_object(header.get("parameters"), "'parameters'"), outputs=outputs)


def _wants_binary(req: InferRequest, name: str) -> bool:
    for requested in req.outputs or ():
        if requested.name == name and "binary_data" in requested.parameters:
            return bool(requested.parameters["binary_data"])
    return bool(req.parameters.get("binary_data_output", False))


def encode_response(model_name: str, model_version: str, req: InferRequest,
                    outputs: list[Tensor]) -> tuple[bytes, int | None]:
    """The response body and, when binary outputs follow the JSON, the JSON header's length."""
    body: dict[str, Any] = {"model_name": model_name, "model_version": model_version}
    if req.id is not None:
        body["id"] = req.id
    chunks: list[bytes] = []
    encoded = []
    for tensor in outputs:
        item: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype,
                                "shape": tensor.shape}
        params = dict(tensor.parameters)
        if _wants_binary(req, tensor.name):
            raw = to_binary(tensor)
            params["binary_data_size"] = len(raw)
            chunks.append(raw)
        else:
            item["data"] = to_values(tensor)
        if params:
            item["parameters"] = params
        encoded.append(item)
    body["outputs"] = encoded
    header = wirejson.dumps(body)
    if not chunks:
        return header, None
    return header + b"".join(chunks), len(header)
