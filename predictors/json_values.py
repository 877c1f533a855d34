"""Output tensors as JSON-ready values: AI Platform's TensorFlow predictions, and the batch rule.

AI Platform's `:predict` answers with its own (compact) JSON, so tensors become Python values here:
float32 in the shortest form that reads back as the same float32 (3.5, not 3.5000000xxx), strings
decoded (or `{"b64": ...}` for outputs named `*_bytes` and for bytes that are not UTF-8). TF Serving
writes its own bytes (protocols/tfserving_json.py) but shares `batch_size`, whose checks and
words are json_tensor.cc MakeRowFormatJsonFromTensors'.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from core.errors import PredictionFailed
from predictors.json_tensor import B64, BYTES_SUFFIX


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
    if array.dtype == np.float32 and array.ndim and np.isfinite(array).all():
        # The same values as below, much faster: orjson writes a float32 array in its
        # shortest round-trip form (Ryu's f2s: the same digits as numpy's repr) and reads the
        # text back as doubles. (It writes NaN and Infinity as null, so those arrays go below.)
        return orjson.loads(orjson.dumps(np.ascontiguousarray(array),
                                         option=orjson.OPT_SERIALIZE_NUMPY))
    if array.dtype in (np.float32, np.float16):
        # The shortest decimal that reads back as the same float32 (numpy's repr), as a double.
        return array.astype(str).astype(np.float64).tolist()
    return array.tolist()


def batch_size(outputs: Mapping[str, np.ndarray]) -> int:
    """The common first dimension of `outputs` (MakeRowFormatJsonFromTensors' checks and words)."""
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
