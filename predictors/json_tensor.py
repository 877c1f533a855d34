"""JSON values <-> numpy tensors, by the rules of TensorFlow Serving's REST API.

Both AI Platform's TensorFlow `:predict` and the TF Serving protocol turn JSON into named tensors
the same way, so the rules live here, below both (pure numpy: no TensorFlow, no HTTP). They follow
tensorflow_serving/util/json_tensor.cc (FillTensorMapFromInstancesList, FillTensorMapFromInputsMap,
MakeRowFormatJsonFromTensors) and https://www.tensorflow.org/tfx/serving/api_rest:

- row format: `instances` is a list of values (one input) or of objects keyed by input name (every
  input named in every object); each instance must have the same shape; they are stacked on a new
  batch dimension.
- columnar format: `inputs` is a value (one input) or an object with every input by name.
- `{"b64": "..."}` is binary data, for string tensors only; outputs named `*_bytes` are written so.
- numbers must fit the tensor's type without loss; NaN and +-Infinity are valid floats.
- float32 outputs are written in the shortest form that reads back as the same float32 (3.5, not
  3.5000000xxx), the way TF Serving's WriteDecimal does.

tf.Example features for `:classify` / `:regress` follow the same file: predictors/json_example.py.
Errors are PredictionFailed: AI Platform shows them as "Prediction failed: <detail>", TF Serving
as the bare detail.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from errors import PredictionFailed

B64 = "b64"
BYTES_SUFFIX = "_bytes"
#: numpy's limit on dimensions, less one for the batch dimension rows are stacked on.
MAX_RANK = 64
_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half", "object": "string"}


def type_name(dtype: np.dtype) -> str:
    """TensorFlow's DataTypeString for a numpy dtype (used in error messages)."""
    return _TYPE_NAMES.get(dtype.name, dtype.name)


def _json_text(value: Any) -> str:
    try:
        text = json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def json_type(value: Any) -> str:
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return "Number"
    if isinstance(value, str):
        return "String"
    return "Array" if isinstance(value, list) else "Object"


def is_b64(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(B64), str)


def decode_b64(value: Any) -> bytes:
    if not is_b64(value):
        raise PredictionFailed(f"JSON Value: {_json_text(value)} not formatted correctly for base64 data")
    text = value[B64]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise PredictionFailed("Unable to base64 decode") from None


def _type_error(value: Any, dtype: np.dtype) -> PredictionFailed:
    return PredictionFailed(f"JSON Value: {_json_text(value)} Type: {json_type(value)} is not of "
                            f"expected type: {type_name(dtype)}")


def _leaf(value: Any, dtype: np.dtype) -> Any:
    """One scalar converted for `dtype`, with TF Serving's type and precision checks."""
    kind = dtype.kind
    if kind == "O":
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, dict):
            return decode_b64(value)
        raise _type_error(value, dtype)
    if isinstance(value, bool):
        if kind == "b":
            return value
        raise _type_error(value, dtype)
    if kind == "f":
        if not isinstance(value, (int, float)):
            raise _type_error(value, dtype)
        info = np.finfo(dtype)
        lossy = (abs(value) > 2 ** info.nmant * 2 - 1 if isinstance(value, int)
                 else math.isfinite(value) and abs(value) > float(info.max))
        if lossy:
            raise PredictionFailed(f"Cannot convert JSON value: {value} to {type_name(dtype)} without "
                                   "loss of precision.")
        return value
    if kind in "iu":
        limits = np.iinfo(dtype)
        if isinstance(value, int) and limits.min <= value <= limits.max:
            return value
        raise _type_error(value, dtype)
    raise _type_error(value, dtype)  # bool tensor given a non-bool


def _shape_of(value: Any) -> list[int]:
    """The dense shape a nested list claims, read along its first elements (like TF Serving)."""
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill(value: Any, level: int, shape: list[int], dtype: np.dtype, out: list[Any]) -> None:
    if not isinstance(value, list):
        if level != len(shape):
            raise PredictionFailed(f"JSON Value: {_json_text(value)} found at incorrect level: "
                                   f"{level + 1} in the JSON DOM. Expected at level: {len(shape)}")
        out.append(_leaf(value, dtype))
        return
    if level >= len(shape):
        raise PredictionFailed(f"Encountered list at unexpected level: {level} expected < {len(shape)}")
    if len(value) != shape[level]:
        raise PredictionFailed(f"Encountered list at unexpected size: {len(value)} at level: {level} "
                               f"expected size: {shape[level]}")
    for item in value:
        _fill(item, level + 1, shape, dtype, out)


def _fast(value: Any, dtype: np.dtype) -> np.ndarray | None:
    """numpy's own conversion when it is certainly what the checks would accept, else None."""
    if dtype.kind not in "fiub" or isinstance(value, dict):
        return None
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        return None  # ragged: the slow path says where
    if arr.dtype.kind == "b":
        return arr if dtype.kind == "b" else None
    if dtype.kind == "f" and arr.dtype.kind in "fi":
        finite = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr
        info = np.finfo(dtype)
        limit = info.max if arr.dtype.kind == "f" else 2 ** info.nmant * 2 - 1
        if finite.size and np.abs(finite).max() > limit:
            return None  # out of range or not exact: the slow path words the error
        return arr.astype(dtype)
    if dtype.kind in "iu" and arr.dtype.kind == "i":
        limits = np.iinfo(dtype)
        if arr.size and (arr.min() < limits.min or arr.max() > limits.max):
            return None
        return arr.astype(dtype)
    return None


def to_array(value: Any, dtype: np.dtype) -> np.ndarray:
    """A JSON value (scalar or rectangular nested lists) as an array of `dtype`."""
    if dtype.name == "bfloat16":  # ml_dtypes' type: numpy has no rules for it, float32's apply
        return to_array(value, np.dtype(np.float32)).astype(dtype)
    fast = _fast(value, dtype)
    if fast is not None:
        return fast
    shape = _shape_of(value)
    if len(shape) >= MAX_RANK:
        raise PredictionFailed(f"JSON Value is a list nested {len(shape)} deep; a tensor has at most "
                               f"{MAX_RANK - 1} dimensions here")
    flat: list[Any] = []
    _fill(value, 0, shape, dtype, flat)
    arr = np.empty(len(flat), dtype=dtype)
    arr[:] = flat
    return arr.reshape(shape)


def _is_named(value: Any) -> bool:
    return isinstance(value, dict) and not is_b64(value)


def rows_to_columns(instances: list[Any], dtypes: Mapping[str, np.dtype]) -> dict[str, np.ndarray]:
    """The row format: a non-empty `instances` list -> one batched array per input name."""
    names = sorted(dtypes)
    named = _is_named(instances[0])
    if not named and len(names) > 1:
        raise PredictionFailed("instances is a plain list, but expecting list of objects as multiple "
                               "input tensors required as per tensorinfo_map")
    columns: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for index, instance in enumerate(instances):
        if named != _is_named(instance):
            got = "object" if named is False else "list"
            raise PredictionFailed(f"Expecting {'object' if named else 'value/list'} but got {got} at "
                                   f"item {index} of input list")
        items = instance.items() if named else [(names[0], instance)]
        if named and set(instance) != set(names):
            raise PredictionFailed(
                f"Failed to process element: {index} of 'instances' list. JSON object: "
                f"{_json_text(instance)} keys must be equal to: {','.join(names)}")
        for name, value in items:
            try:
                arr = to_array(value, dtypes[name])
                previous = columns[name][0] if columns[name] else None
                if previous is not None and previous.shape != arr.shape:
                    raise PredictionFailed(f"Expecting shape {list(previous.shape)} but got: "
                                           f"{list(arr.shape)}")
            except PredictionFailed as exc:
                key = f" key: {name}" if named else ""
                raise PredictionFailed(f"Failed to process element: {index}{key} of 'instances' list. "
                                       f"Error: {exc.detail}") from None
            columns[name].append(arr)
    return {name: np.stack(arrays) for name, arrays in columns.items()}


def inputs_to_columns(inputs: Any, dtypes: Mapping[str, np.dtype]) -> dict[str, np.ndarray]:
    """The columnar format: `inputs` is one value (one input) or an object of every input."""
    names = sorted(dtypes)
    if not _is_named(inputs):
        if len(names) > 1:
            raise PredictionFailed("inputs is a plain value/list, but expecting an object as multiple "
                                   "input tensors required as per tensorinfo_map")
        return {names[0]: to_array(inputs, dtypes[names[0]])}
    for name in names:
        if name not in inputs:
            raise PredictionFailed(f"Missing named input: {name} in 'inputs' object.")
    extra = sorted(set(inputs) - set(names))
    if extra:
        raise PredictionFailed(f"Unknown named input(s): {', '.join(extra)} in 'inputs' object; the "
                               f"signature's inputs are: {', '.join(names)}.")
    return {name: to_array(inputs[name], dtypes[name]) for name in names}


def _bytes_json(value: bytes, as_b64: bool) -> Any:
    if not as_b64:
        try:
            return value.decode()
        except UnicodeDecodeError:
            pass  # not text: JSON cannot carry it raw, so it goes out as base64 anyway
    return {B64: base64.b64encode(value).decode()}


def json_value(array: np.ndarray, name: str) -> Any:
    """A tensor as JSON-ready nested lists (float32 in shortest form, strings decoded or b64)."""
    if array.dtype.kind in "OSU":
        as_b64 = name.endswith(BYTES_SUFFIX)
        out = np.empty(array.size, dtype=object)
        for i, v in enumerate(array.reshape(-1).tolist()):
            out[i] = _bytes_json(v if isinstance(v, bytes) else str(v).encode(), as_b64)
        return out.reshape(array.shape).tolist()
    if array.dtype.name == "bfloat16":
        array = array.astype(np.float32)
    if array.dtype in (np.float32, np.float16):
        # The shortest decimal that reads back as the same float32 (numpy's repr), as a double.
        return array.astype(str).astype(np.float64).tolist()
    return array.tolist()


def batch_size(outputs: Mapping[str, np.ndarray]) -> int:
    """The common first dimension of `outputs` (row format needs one)."""
    size = -1
    for name in sorted(outputs):
        arr = outputs[name]
        if arr.ndim == 0:
            raise PredictionFailed(f"Tensor name: {name} has no shape information ")
        if size >= 0 and arr.shape[0] != size:
            raise PredictionFailed(f"Tensor name: {name} has inconsistent batch size: {arr.shape[0]} "
                                   f"expecting: {size}")
        size = arr.shape[0]
    return size


def columns_to_rows(outputs: Mapping[str, np.ndarray]) -> list[Any]:
    """Row-format predictions: one value per instance, or one object per instance for several."""
    size = batch_size(outputs)
    values = {name: json_value(arr, name) for name, arr in outputs.items()}
    if len(values) == 1:
        return next(iter(values.values()))  # type: ignore[no-any-return]
    names = sorted(values)
    return [{name: values[name][i] for name in names} for i in range(size)]


def columns_json(outputs: Mapping[str, np.ndarray]) -> Any:
    """Columnar `outputs`: the one tensor, or an object of every output by name."""
    values = {name: json_value(outputs[name], name) for name in sorted(outputs)}
    return next(iter(values.values())) if len(values) == 1 else values
