"""Tensors on the wire <-> what predictors receive and return: the one place that mapping lives.

Pure functions (numpy only) shared by the Open Inference Protocol V2 (REST and gRPC) and grps.

The mapping between a protocol's tensors and a predictor (AI Platform's `predict(instances)`):

- one input tensor: the instances are the rows of its first dimension (`array.tolist()`), so a
  [3, 4] FP32 tensor is three instances of four numbers, and a [2] BYTES tensor two strings
  (built-in frameworks get the numeric array itself: protocols/inference.instances_for);
- several input tensors: one object per row, keyed by input name (`{"a": a[i], "b": b[i]}`),
  which is AI Platform's JSON form for named inputs; every input needs the same first dimension;
- BYTES elements become `str` when they are UTF-8, else stay `bytes`;
- predictions back to outputs: a list of objects becomes one output per key (rows stacked in
  instance order); anything else becomes a single output whose rows are the predictions, named
  after the model's one declared output (predictor.signature()) or `output-0`;
- output datatypes follow the model's signature when it declares that output, else the values:
  bool -> BOOL, integers -> INT64, floats -> FP64, strings/bytes -> BYTES.

Predictors that take tensors directly (`predict_tensors(inputs: dict[str, ndarray], ...)`, the
TensorFlow predictor) skip the instances step; see protocols/inference.py.
The binary form of tensors (V2's binary extension, gRPC raw contents) is protocols/
tensor_binary.py; grps's dtype tables are protocols/grps_tensors.py.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from core.errors import Internal, InvalidArgument

#: V2 datatype -> numpy dtype of the decoded array (BF16 decodes to float32).
NUMPY_DTYPES: dict[str, Any] = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "BF16": np.float32,
    "BYTES": np.object_,
}
DATATYPES = tuple(NUMPY_DTYPES)
#: Datatypes the JSON (and typed gRPC contents) form cannot carry.
BINARY_ONLY = frozenset({"FP16", "BF16"})


@dataclasses.dataclass
class Tensor:
    """A named, decoded tensor. `data` has the datatype's numpy dtype and the tensor's shape."""

    name: str
    datatype: str
    data: np.ndarray
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def shape(self) -> list[int]:
        return list(self.data.shape)


def check_datatype(datatype: Any, where: str) -> str:
    if not isinstance(datatype, str) or datatype not in NUMPY_DTYPES:  # [] / {}: unhashable
        raise InvalidArgument(
            f"{where}: unknown datatype {datatype!r}; expected one of {', '.join(DATATYPES)}."
        )
    return str(datatype)


#: The largest element count any shape may describe, zero dimensions aside: what numpy can
#: address for 16-byte elements. A shape past it cannot be allocated, even with no elements.
_MAX_SPAN = (2**63 - 1) // 16


def check_shape(shape: Any, where: str) -> tuple[int, ...]:
    if not isinstance(shape, (list, tuple)) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise InvalidArgument(f"{where}: shape must be a list of non-negative integers, got {shape!r}.")
    if math.prod(max(d, 1) for d in shape) > _MAX_SPAN:
        raise InvalidArgument(f"{where}: shape {list(shape)} is too large.")
    return tuple(int(d) for d in shape)


def element_count(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _flatten(data: Any, out: list[Any]) -> None:
    if isinstance(data, (list, tuple)):
        for item in data:
            _flatten(item, out)
    else:
        out.append(data)


def _element_ok(datatype: str, value: Any) -> bool:
    if datatype == "BOOL":
        return isinstance(value, bool)
    if datatype == "BYTES":
        return isinstance(value, (str, bytes))
    if isinstance(value, bool):
        return False
    if datatype.startswith(("INT", "UINT")):
        return isinstance(value, int)
    return isinstance(value, (int, float))


_KINDS = {"BOOL": "b", "INT": "iu", "UINT": "iu", "FP": "iuf"}


def _numeric_fast_path(datatype: str, shape: tuple[int, ...], values: Any) -> np.ndarray | None:
    """Well-formed numeric data converted by numpy in one go; None sends it down the checked path
    (element by element, with a precise error), e.g. when rows are ragged or a type is wrong."""
    kinds = _KINDS.get(datatype.rstrip("0123456789"))
    if kinds is None or not isinstance(values, list):
        return None
    try:
        array = np.asarray(values)
    except (ValueError, TypeError):
        return None
    if array.dtype.kind not in kinds or array.size != element_count(shape):
        return None
    target = np.dtype(NUMPY_DTYPES[datatype])
    if array.dtype.kind in "iu" and target.kind in "iu":
        info = np.iinfo(target)
        if array.size and (array.min() < info.min or array.max() > info.max):
            return None
    return array.astype(target, copy=False).reshape(shape)


def from_values(name: str, datatype: str, shape: tuple[int, ...], values: Any) -> Tensor:
    """A tensor from JSON `data` (nested or flat, row-major) or typed gRPC contents."""
    where = f"input '{name}'"
    if datatype in BINARY_ONLY:
        raise InvalidArgument(f"{where}: {datatype} data must be sent as binary tensor data.")
    fast = _numeric_fast_path(datatype, shape, values)
    if fast is not None:
        return Tensor(name, datatype, fast)
    flat: list[Any] = []
    _flatten(values, flat)
    expected = element_count(shape)
    if len(flat) != expected:
        raise InvalidArgument(
            f"{where}: shape {list(shape)} needs {expected} elements, but data has {len(flat)}."
        )
    for value in flat:
        if not _element_ok(datatype, value):
            raise InvalidArgument(f"{where}: element {value!r} is not a valid {datatype} value.")
    try:
        if datatype == "BYTES":
            array = np.empty(len(flat), dtype=np.object_)
            array[:] = [v.encode() if isinstance(v, str) else v for v in flat]
        else:
            array = np.array(flat, dtype=NUMPY_DTYPES[datatype])
    except (OverflowError, ValueError, TypeError) as exc:
        raise InvalidArgument(f"{where}: data does not fit {datatype}: {exc}") from None
    return Tensor(name, datatype, array.reshape(shape))


def to_values(tensor: Tensor) -> list[Any]:
    """The flat JSON `data` of an output tensor (BYTES as UTF-8 strings)."""
    if tensor.datatype in BINARY_ONLY:
        raise InvalidArgument(
            f"output '{tensor.name}' is {tensor.datatype}, which can only be returned as binary "
            "data; request it with binary_data."
        )
    flat = tensor.data.reshape(-1)
    if tensor.datatype != "BYTES":
        return list(flat.tolist())
    try:
        return [v.decode() if isinstance(v, bytes) else str(v) for v in flat]
    except UnicodeDecodeError:
        raise InvalidArgument(
            f"output '{tensor.name}' holds bytes that are not UTF-8; request it with binary_data."
        ) from None


def _element(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value
    return value


def _rows(array: np.ndarray) -> list[Any]:
    if array.dtype == np.object_:
        return np.vectorize(_element, otypes=[object])(array).tolist() if array.size else []
    return list(array.tolist())


def to_instances(inputs: list[Tensor]) -> list[Any]:
    """Predictor instances from input tensors (see the module docstring)."""
    for tensor in inputs:
        if tensor.data.ndim == 0:
            raise InvalidArgument(
                f"input '{tensor.name}' is a scalar; its first dimension must list the instances."
            )
    if len(inputs) == 1:
        return _rows(inputs[0].data)
    batch = {t.data.shape[0] for t in inputs}
    if len(batch) != 1:
        raise InvalidArgument(
            "inputs must share their first (batch) dimension; got "
            + ", ".join(f"'{t.name}': {t.data.shape[0]}" for t in inputs)
        )
    columns = {t.name: _rows(t.data) for t in inputs}
    return [{name: rows[i] for name, rows in columns.items()} for i in range(batch.pop())]


def datatype_of(array: np.ndarray) -> str:
    kind = array.dtype.kind
    if kind == "b":
        return "BOOL"
    if kind in "iu":
        return {np.dtype(v): k for k, v in NUMPY_DTYPES.items()
                if k not in ("BF16",) and v is not np.object_}.get(array.dtype, "INT64")
    if kind == "f":
        return {2: "FP16", 4: "FP32"}.get(array.dtype.itemsize, "FP64")
    return "BYTES"


def to_array(values: Any, datatype: str | None = None) -> tuple[np.ndarray, str]:
    """Predicted values (rows) as an array of `datatype` (inferred when None or incompatible)."""
    try:
        array = np.asarray(values)
    except ValueError as exc:  # ragged rows
        raise Internal(f"The model's predictions cannot be encoded as a tensor: {exc}") from None
    if array.dtype == np.object_ and any(isinstance(v, (list, dict)) for v in array.reshape(-1)):
        raise Internal("The model's predictions cannot be encoded as a tensor: rows differ in shape.")
    if array.dtype.name == "bfloat16":  # TensorFlow's (ml_dtypes) bfloat16: no numpy kind of its own
        return array.astype(np.float32), "BF16"
    if datatype is None and isinstance(values, np.ndarray) and array.dtype.kind in "biuf":
        return array, datatype_of(array)  # a framework's own array keeps its dtype
    if array.dtype.kind in "USO":
        out = np.empty(array.shape, dtype=np.object_)
        out[...] = array
        return out, "BYTES"
    if datatype and datatype != "BYTES" and datatype in NUMPY_DTYPES:
        try:
            return array.astype(NUMPY_DTYPES[datatype]), datatype
        except (TypeError, ValueError):
            pass
    if array.dtype.kind in "iu" and datatype is None:
        array = array.astype(np.int64)
    elif array.dtype.kind == "f" and datatype is None and array.dtype.itemsize > 4:
        array = array.astype(np.float64)
    return array, datatype_of(array)


def from_predictions(predictions: list[Any], declared: dict[str, str],
                     default_name: str = "output-0") -> list[Tensor]:
    """Output tensors from predictions; `declared` maps output names to their datatypes."""
    if predictions and all(isinstance(p, dict) for p in predictions):
        keys = list(predictions[0])
        if any(list(p) != keys and set(p) != set(keys) for p in predictions):
            raise Internal("The model's predictions cannot be encoded as tensors: their keys differ.")
        outputs = []
        for key in keys:
            array, datatype = to_array([p[key] for p in predictions], declared.get(key))
            outputs.append(Tensor(str(key), datatype, array))
        return outputs
    name = next(iter(declared)) if len(declared) == 1 else default_name
    array, datatype = to_array(predictions, declared.get(name))
    return [Tensor(name, datatype, array)]


def from_flat(name: str, datatype: str, shape: tuple[int, ...], values: Any) -> Tensor:
    """A tensor from already-typed flat values (gRPC typed contents, grps flat_* fields)."""
    where = f"input '{name}'"
    flat = list(values)
    expected = element_count(shape)
    if len(flat) != expected:
        raise InvalidArgument(
            f"{where}: shape {list(shape)} needs {expected} elements, but data has {len(flat)}."
        )
    try:
        if datatype == "BYTES":
            array = np.empty(len(flat), dtype=np.object_)
            array[:] = [v.encode() if isinstance(v, str) else bytes(v) for v in flat]
        else:
            array = np.array(flat, dtype=NUMPY_DTYPES[datatype])
    except (OverflowError, ValueError, TypeError) as exc:
        raise InvalidArgument(f"{where}: data does not fit {datatype}: {exc}") from None
    return Tensor(name, datatype, array.reshape(shape))
