"""TF Serving's REST response bodies, byte for byte.

Two writers, as in TF Serving:
- predict, classify, regress and error bodies come from rapidjson's PrettyWriter
  (tensorflow_serving/util/json_tensor.cc MakeRowFormatJsonFromTensors,
  MakeColumnarFormatJsonFromTensors, MakeJsonFromClassificationResult,
  MakeJsonFromRegressionResult, MakeJsonFromStatus; layout in predictors/rapidjson_writer.py).
  Row predictions put each instance on one line (`"predictions": [3.5, 4.0, 5.5\\n    ]`),
  columnar outputs are fully expanded, regress results are one line.
- status and metadata come from protobuf's JSON printer with add_whitespace and
  always_print_fields_with_no_presence (model_servers/http_rest_api_util.cc ToJsonString):
  one-space indent, a newline after the document; for metadata, two documents glued together
  by hand (`{\\n"model_spec":{...}\\n,\\n"metadata": {"signature_def": {...}\\n}\\n}\\n`). Fields go in
  field-number order with oneof members last (what the printer emits: "name", "signature_name",
  "version"; a TensorInfo's "dtype", "tensor_shape", "name"); map entries sorted by key.

Where api_rest.md shows other bytes (`[3.5, 4.0, 5.5]` closing on the same line, a one-line error
body), the current release's code is what answers, so its bytes are the ones written here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.errors import InvalidArgument
from predictors.json_tensor import BYTES_SUFFIX
from predictors.json_values import batch_size
from predictors.rapidjson_writer import PrettyWriter, encode, quote, text_of, write_decimal, write_decimals

#: numpy dtype -> the TensorFlow type name AddSingleValueAndAdvance writes (others fail).
_WRITTEN = {"float32": "float", "float64": "double", "int32": "int", "int16": "int", "int8": "int",
            "uint8": "int", "int64": "int", "uint32": "int", "uint64": "int", "bool": "bool",
            "object": "string", "bytes": "string"}
_REFUSED_NAMES = {"float16": "half", "bfloat16": "bfloat16", "uint16": "uint16",
                  "complex64": "complex64", "complex128": "complex128"}


def _scalars(array: np.ndarray, name: str) -> list[Any]:
    """Every value of `array`, flat, as AddSingleValueAndAdvance writes it."""
    dtype = array.dtype
    key = "bytes" if dtype.kind in "SU" else dtype.name
    kind = _WRITTEN.get(key)
    if kind is None:
        if not array.size:
            return []
        raise InvalidArgument("Failed to write JSON value for tensor type: "
                              f"{_REFUSED_NAMES.get(dtype.name, dtype.name)}")
    if kind in ("float", "double"):
        return write_decimals(array, kind == "float")
    flat = array.reshape(-1).tolist()
    if kind == "bool":
        return ["true" if v else "false" for v in flat]
    if kind == "int":
        return [str(v) for v in flat]
    as_b64 = name.endswith(BYTES_SUFFIX)
    out: list[Any] = []
    for v in flat:
        raw = v if isinstance(v, bytes) else str(v).encode()
        if as_b64:  # IsNamedTensorBytes: written as { "b64": <base64> } by _values
            out.append(("b64", base64.b64encode(raw).decode()))
        else:
            out.append(quote(text_of(raw)))
    return out


def _values(writer: PrettyWriter, texts: list[Any], start: int, shape: tuple[int, ...]) -> int:
    """AddTensorValues: `shape`'s nested arrays of texts[start:] (a scalar bare); returns the end."""
    def scalar(text: Any) -> None:
        if isinstance(text, tuple):
            writer.start(array=False)
            writer.key("b64")
            writer.value(quote(text[1]))
            writer.end()
        else:
            writer.value(text)

    position = start

    def nested(dim: int) -> None:  # recursion as deep as the rank (< 64)
        nonlocal position
        writer.start(array=True)
        if dim == len(shape) - 1:
            row = texts[position:position + shape[dim]]
            position += shape[dim]
            if row and not isinstance(row[0], tuple):
                writer.values(row)
            else:
                for text in row:
                    scalar(text)
        else:
            for _ in range(shape[dim]):
                nested(dim + 1)
        writer.end()

    if shape:
        nested(0)
    else:
        scalar(texts[position])
        position += 1
    return position


def predict_rows(outputs: Mapping[str, np.ndarray]) -> bytes:
    """`{"predictions": ...}`: one value, or one object of every output, per instance."""
    if not outputs:
        raise InvalidArgument("Cannot convert empty tensor map to JSON")
    size = batch_size(outputs)
    names = sorted(outputs)
    if len(names) == 1:
        single = _single_line_rows(_scalars(outputs[names[0]], names[0]), outputs[names[0]].shape)
        if single is not None:
            return encode('{\n    "predictions": [' + ", ".join(single) + '\n    ]\n}' if single
                          else '{\n    "predictions": []\n}')
    writer = PrettyWriter()
    writer.start(array=False)
    writer.key("predictions")
    writer.start(array=True)
    several = len(names) > 1
    texts = {name: _scalars(outputs[name], name) for name in names}
    offsets = dict.fromkeys(names, 0)
    for _ in range(size):
        if several:
            writer.start(array=False)
        writer.single_line_arrays = True
        for name in names:
            if several:
                writer.key(name)
            offsets[name] = _values(writer, texts[name], offsets[name], outputs[name].shape[1:])
        writer.single_line_arrays = False
        if several:
            writer.end()
    writer.end()
    writer.end()
    return encode(writer.text())


def _single_line_rows(texts: list[Any], shape: tuple[int, ...]) -> list[str] | None:
    """What predict_rows' writer gives one output's instances, each on one line (nested arrays
    `[a, b]`, items joined by ", "), built by joining the texts directly; None where that
    writer is needed (base64 objects, a dimension of 0 below the batch)."""
    if (texts and isinstance(texts[0], tuple)) or 0 in shape[1:]:
        return None
    items: list[str] = texts
    for width in reversed(shape[1:]):  # innermost dimension first
        items = ["[" + ", ".join(items[i:i + width]) + "]" for i in range(0, len(items), width)]
    return items


def predict_columns(outputs: Mapping[str, np.ndarray]) -> bytes:
    """`{"outputs": ...}`: the one tensor, or an object of every output by name."""
    if not outputs:
        raise InvalidArgument("Cannot convert empty tensor map to JSON")
    writer = PrettyWriter()
    writer.start(array=False)
    writer.key("outputs")
    several = len(outputs) > 1
    if several:
        writer.start(array=False)
    for name in sorted(outputs):
        if several:
            writer.key(name)
        _values(writer, _scalars(outputs[name], name), 0, outputs[name].shape)
    if several:
        writer.end()
    writer.end()
    return encode(writer.text())


def classify_body(results: Sequence[Sequence[tuple[str, float]]]) -> bytes:
    """`{"results": [[[label, score], ...], ...]}`, each example's classes on one line."""
    if not results:
        raise InvalidArgument("Cannot convert empty ClassificationResults to JSON")
    writer = PrettyWriter()
    writer.start(array=False)
    writer.key("results")
    writer.start(array=True)
    for classes in results:
        writer.single_line_arrays = True
        writer.start(array=True)
        for label, score in classes:
            writer.start(array=True)
            writer.value(quote(label))
            writer.value(write_decimal(float(np.float32(score)), True))
            writer.end()
        writer.end()
        writer.single_line_arrays = False
    writer.end()
    writer.end()
    return encode(writer.text())


def regress_body(values: Sequence[float]) -> bytes:
    """`{"results": [v1, v2, ...]}` on one line."""
    if not values:
        raise InvalidArgument("Cannot convert empty RegressionResults to JSON")
    writer = PrettyWriter()
    writer.start(array=False)
    writer.key("results")
    writer.single_line_arrays = True
    writer.start(array=True)
    for value in values:
        writer.value(write_decimal(float(np.float32(value)), True))
    writer.end()
    writer.end()
    return encode(writer.text())


def error_body(message: str) -> bytes:
    """MakeJsonFromStatus: `{\\n    "error": "<message>"\\n}`."""
    writer = PrettyWriter()
    writer.start(array=False)
    writer.key("error")
    writer.value(quote(message))
    writer.end()
    return encode(writer.text())


# -- protobuf's JSON printer (status and metadata) ------------------------------------------

def _proto_text(value: Any, indent: int, out: list[str]) -> None:
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            out.append(("," if index else "") + "\n" + pad + quote(key) + ": ")
            _proto_text(item, indent + 1, out)
        out.append("\n" + " " * indent + "}")
    elif isinstance(value, list):
        if not value:
            out.append("[]")
            return
        out.append("[")
        for index, item in enumerate(value):
            out.append(("," if index else "") + "\n" + pad)
            _proto_text(item, indent + 1, out)
        out.append("\n" + " " * indent + "]")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, (int, float)):
        out.append(repr(value))
    else:
        out.append(quote(str(value)))


def proto_text(document: Mapping[str, Any]) -> str:
    """A message (as an ordered dict of proto-JSON values) as MessageToJsonString prints it."""
    out: list[str] = []
    _proto_text(dict(document), 0, out)
    return "".join(out) + "\n"


def proto_message(message: Any) -> dict[str, Any]:
    """A protobuf message as proto-JSON values, in the printer's field order (see above)."""
    fields = message.DESCRIPTOR.fields
    plain = sorted((f for f in fields if f.containing_oneof is None), key=lambda f: f.number)
    chosen = sorted((f for f in fields if f.containing_oneof is not None and message.HasField(f.name)),
                    key=lambda f: f.number)
    out: dict[str, Any] = {}
    for field in plain + chosen:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = {str(k): _proto_value(field.message_type.fields_by_name["value"], value[k])
                               for k in sorted(value)}
        elif field.is_repeated:
            out[field.name] = [_proto_value(field, v) for v in value]
        elif field.message_type is not None and not message.HasField(field.name):
            continue  # a message field that is not set has presence: not printed
        else:
            out[field.name] = _proto_value(field, value)
    return out


def _proto_value(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        if field.message_type.full_name.startswith("google.protobuf.") and \
                field.message_type.full_name.endswith("Value"):
            return _proto_value(field.message_type.fields_by_name["value"], value.value)
        return proto_message(value)
    if field.enum_type is not None:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else value
    if field.type in (field.TYPE_INT64, field.TYPE_UINT64, field.TYPE_SINT64, field.TYPE_FIXED64,
                      field.TYPE_SFIXED64):
        return str(value)
    if field.type == field.TYPE_BYTES:
        return base64.b64encode(value).decode()
    return value


def metadata_text(model_spec: Mapping[str, Any], signature_defs: Mapping[str, Any]) -> str:
    """http_rest_api_util.cc ToJsonString(GetModelMetadataResponse): two printed messages glued."""
    return ("{\n\"model_spec\":" + proto_text(model_spec) + ",\n\"metadata\": {\"signature_def\": "
            + proto_text({"signature_def": dict(signature_defs)}) + "}\n}\n")
