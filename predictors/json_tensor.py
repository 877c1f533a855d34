"""JSON values <-> numpy tensors, by the rules of TensorFlow Serving's REST API.

Both AI Platform's TensorFlow `:predict` and the TF Serving protocol turn JSON into named tensors
the same way (AI Platform ran TF Serving underneath), so the rules live here, below both (pure
numpy: no TensorFlow, no HTTP). They follow tensorflow_serving/util/json_tensor.cc step by step,
checks and messages in its order:

- row format (FillTensorMapFromInstancesList): `instances` is a list of values (one input) or of
  objects keyed by input name; each item is read as a dense tensor (shape from its first
  elements, GetDenseTensorShape; values filled level by level, FillTensorProto), then its value
  count and shape are compared with the first item's (AddInstanceItem); items are stacked.
- columnar format (FillTensorMapFromInputsMap): `inputs` is a value (one input) or an object that
  names every input (other keys are not read).
- values (AddValueToTensor): any JSON number for DT_FLOAT / DT_DOUBLE, converted as C++ does
  (an integer is rounded to the nearest float, a double beyond float range becomes inf); int32
  range for DT_INT8/16/32 and DT_UINT8 (the narrow ones wrap, as TensorProto's int_val does);
  int64 / uint32 / uint64 ranges; true/false for DT_BOOL; strings or `{"b64": ...}` for
  DT_STRING. Other dtypes (half, bfloat16, uint16, complex, ...) are UNIMPLEMENTED (HTTP 501).

Shapes are not compared with the signature's static shapes: TF Serving feeds through the C++
session, which does not check them (predictors/tensorflow.py runs signatures the same way).
tf.Example features for `:classify` / `:regress` follow the same file: predictors/json_example.py.
Errors are PredictionFailed: AI Platform shows them as "Prediction failed: <detail>", TF Serving
as the bare detail.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from core.errors import Code, PredictionFailed
from predictors import json_batch
from predictors.rapidjson_writer import debug_string

B64 = "b64"
BYTES_SUFFIX = "_bytes"
#: numpy's limit on dimensions, less one for the batch dimension rows are stacked on.
MAX_RANK = 64
#: TensorFlow dtypes AddValueToTensor converts, and their numpy types.
NUMPY_TYPES = {
    "DT_FLOAT": np.float32, "DT_DOUBLE": np.float64, "DT_INT32": np.int32, "DT_INT16": np.int16,
    "DT_INT8": np.int8, "DT_UINT8": np.uint8, "DT_INT64": np.int64, "DT_UINT32": np.uint32,
    "DT_UINT64": np.uint64, "DT_BOOL": np.bool_, "DT_STRING": np.object_,
}
#: The JSON integer range each integer dtype accepts (rapidjson IsInt / IsInt64 / IsUint / IsUint64).
_INT_RANGES = {
    "DT_INT32": (-(2 ** 31), 2 ** 31), "DT_INT16": (-(2 ** 31), 2 ** 31),
    "DT_INT8": (-(2 ** 31), 2 ** 31), "DT_UINT8": (-(2 ** 31), 2 ** 31),
    "DT_INT64": (-(2 ** 63), 2 ** 63), "DT_UINT32": (0, 2 ** 32), "DT_UINT64": (0, 2 ** 64),
}


class Unimplemented(PredictionFailed):
    """A tensor dtype TF Serving's JSON conversion does not support (its errors::Unimplemented)."""

    code = Code.UNIMPLEMENTED


def type_name(dtype_name: str) -> str:
    """TensorFlow's DataTypeString (DT_FLOAT -> float), for messages."""
    return dtype_name.removeprefix("DT_").lower()


def json_type(value: Any) -> str:
    """json_tensor.cc JsonTypeString."""
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
        raise PredictionFailed(f"JSON Value: {debug_string(value)} not formatted correctly for base64 data")
    text = value[B64]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise PredictionFailed("Unable to base64 decode") from None


def _type_error(value: Any, dtype_name: str) -> PredictionFailed:
    return PredictionFailed(f"JSON Value: {debug_string(value)} Type: {json_type(value)} is not of "
                            f"expected type: {type_name(dtype_name)}")


def _leaf(value: Any, dtype_name: str) -> Any:
    """One JSON scalar for `dtype_name`, accepted and refused as AddValueToTensor does."""
    if isinstance(value, dict):  # FillTensorProto: objects are base64 for strings, else wrong
        if dtype_name == "DT_STRING":
            return decode_b64(value)
        raise _type_error(value, dtype_name)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if dtype_name in ("DT_FLOAT", "DT_DOUBLE"):
        if not number:
            raise _type_error(value, dtype_name)
        try:
            return float(value)
        except OverflowError:  # an integer past a double's range reads as `1e400` does: infinite
            return math.inf if value > 0 else -math.inf
    if dtype_name in _INT_RANGES:
        low, high = _INT_RANGES[dtype_name]
        if not (number and isinstance(value, int) and low <= value < high):
            raise _type_error(value, dtype_name)
        return value
    if dtype_name == "DT_STRING":
        if not isinstance(value, str):
            raise _type_error(value, dtype_name)
        return value.encode("utf-8", "surrogateescape")
    if dtype_name == "DT_BOOL":
        if not isinstance(value, bool):
            raise _type_error(value, dtype_name)
        return value
    raise Unimplemented(f"Conversion of JSON Value: {debug_string(value)} to type: {type_name(dtype_name)}")


def _shape_of(value: Any) -> list[int]:
    """GetDenseTensorShape: the shape a nested list claims, read along its first elements."""
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill(value: Any, level: int, shape: list[int], dtype_name: str, out: list[Any]) -> None:
    """FillTensorProto: every leaf at level == rank, every list of its level's size."""
    if not isinstance(value, list):
        if level != len(shape):
            raise PredictionFailed(f"JSON Value: {debug_string(value)} found at incorrect level: "
                                   f"{level + 1} in the JSON DOM. Expected at level: {len(shape)}")
        out.append(_leaf(value, dtype_name))
        return
    if level >= len(shape):
        raise PredictionFailed(f"Encountered list at unexpected level: {level} expected < {len(shape)}")
    if len(value) != shape[level]:
        raise PredictionFailed(f"Encountered list at unexpected size: {len(value)} at level: {level} "
                               f"expected size: {shape[level]}")
    for item in value:
        _fill(item, level + 1, shape, dtype_name, out)


def _fast(value: Any, dtype_name: str) -> np.ndarray | None:
    """numpy's own conversion where it is certainly what the checks accept, else None.

    Only for JSON known to hold no true/false (numpy would quietly read them as numbers).
    """
    if dtype_name not in ("DT_FLOAT", "DT_DOUBLE") and dtype_name not in _INT_RANGES:
        return None
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        return None  # ragged: the slow path says where
    if arr.dtype.kind == "f" and dtype_name in ("DT_FLOAT", "DT_DOUBLE"):
        with np.errstate(over="ignore"):  # static_cast<float>: out of range is inf
            return arr.astype(NUMPY_TYPES[dtype_name])
    if arr.dtype.kind in "iu" and arr.size:
        if dtype_name in _INT_RANGES:
            low, high = _INT_RANGES[dtype_name]
            if int(arr.min()) < low or int(arr.max()) >= high:
                return None
        return arr.astype(NUMPY_TYPES[dtype_name])
    return None


def to_array(value: Any, dtype_name: str, bools: bool = True) -> tuple[np.ndarray, int]:
    """One JSON value as a dense array of `dtype_name`, and its value count.

    `bools=False` promises the JSON holds no true/false, which allows numpy's fast conversion.
    """
    if not bools:
        fast = _fast(value, dtype_name)
        if fast is not None:
            return fast, fast.size
    shape = _shape_of(value)
    if len(shape) >= MAX_RANK:  # before filling, which recurses once per level
        raise PredictionFailed(f"JSON Value is a list nested {len(shape)} deep; a tensor has at most "
                               f"{MAX_RANK - 1} dimensions here")
    flat: list[Any] = []
    _fill(value, 0, shape, dtype_name, flat)
    if dtype_name not in NUMPY_TYPES:  # only an empty tensor gets here: nothing was converted
        raise Unimplemented(f"Conversion of JSON Value: {debug_string(value)} to type: "
                            f"{type_name(dtype_name)}")
    arr: np.ndarray = np.empty(len(flat), dtype=NUMPY_TYPES[dtype_name])
    if dtype_name in ("DT_INT8", "DT_INT16", "DT_UINT8"):  # int_val holds int32; the cast wraps
        arr[:] = np.array(flat, dtype=np.int32).astype(arr.dtype)
    else:
        with np.errstate(over="ignore"):
            arr[:] = flat
    return arr.reshape(shape), len(flat)


def _is_named(value: Any) -> bool:
    return isinstance(value, dict) and not is_b64(value)


def _status(exc: PredictionFailed) -> str:
    """absl::Status::ToString of an error, as TF Serving nests it in its own message."""
    return f"{exc.code.name}: {exc.detail}"


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def rows_to_columns(instances: list[Any] | np.ndarray, dtypes: Mapping[str, str],
                    bools: bool = True) -> dict[str, np.ndarray]:
    """The row format: a non-empty `instances` list -> one batched array per input name.

    One unnamed float input is converted in one go where that is exact (predictors/json_batch.py);
    `instances` may then also be a numeric array (wirearray.py), read as its `tolist()`.
    """
    names = sorted(dtypes)
    if len(names) == 1:
        whole = json_batch.stacked(instances, dtypes[names[0]], bools)
        if whole is not None:
            return {names[0]: whole}
    if isinstance(instances, np.ndarray):
        instances = instances.tolist()
    if not isinstance(instances[0], dict) and len(names) > 1:
        raise PredictionFailed("instances is a plain list, but expecting list of objects as multiple "
                               "input tensors required as per tensorinfo_map")
    named = _is_named(instances[0])
    columns: dict[str, list[np.ndarray]] = {name: [] for name in names}
    sizes: dict[str, int] = {}

    def add(index: int, name: str, value: Any, where: str) -> None:
        try:
            if name not in dtypes:
                raise PredictionFailed(f"JSON object: does not have named input: {name}")
            arr, size = to_array(value, dtypes[name], bools)
            if name not in sizes:
                sizes[name] = size
            elif sizes[name] != size:
                raise PredictionFailed(f"Expecting tensor size: {sizes[name]} but got: {size}")
            elif columns[name][0].shape != arr.shape:
                raise PredictionFailed(f"Expecting shape {_shape_text(columns[name][0].shape)} but "
                                       f"got: {_shape_text(arr.shape)}")
        except PredictionFailed as exc:
            raise PredictionFailed(f"Failed to process element: {index}{where} of 'instances' list. "
                                   f"Error: {_status(exc)}") from None
        columns[name].append(arr)

    for index, instance in enumerate(instances):
        if named:
            if not _is_named(instance):
                raise PredictionFailed(f"Expecting object but got list at item {index} of input list")
            for name, value in instance.items():
                add(index, name, value, f" key: {name}")
            if set(instance) != set(names):
                raise PredictionFailed(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{debug_string(instance)} keys must be equal to: {','.join(names)}")
        else:
            if _is_named(instance):
                raise PredictionFailed(f"Expecting value/list but got object at item {index} of input "
                                       "list")
            add(index, names[0], instance, "")
    return {name: np.stack(arrays) for name, arrays in columns.items()}


def inputs_to_columns(inputs: Any, dtypes: Mapping[str, str],
                      bools: bool = True) -> dict[str, np.ndarray]:
    """The columnar format: `inputs` is one value (one input) or an object naming every input."""
    names = sorted(dtypes)
    if not _is_named(inputs):
        if len(names) > 1:
            raise PredictionFailed("inputs is a plain value/list, but expecting an object as multiple "
                                   "input tensors required as per tensorinfo_map")
        return {names[0]: to_array(inputs, dtypes[names[0]], bools)[0]}
    columns = {}
    for name in names:  # keys that name no input are not read
        if name not in inputs:
            raise PredictionFailed(f"Missing named input: {name} in 'inputs' object.")
        columns[name] = to_array(inputs[name], dtypes[name], bools)[0]
    return columns
