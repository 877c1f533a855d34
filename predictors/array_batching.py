"""Adaptive batching of numpy requests: rows of one array, and named tensors.

The tensor-shaped protocols (V2 REST and gRPC, grps, TF Serving's TensorFlow signatures) hand a
model numpy arrays rather than lists of instances: a scikit-learn or XGBoost model gets one
array of rows (`Predictor.takes_arrays`), a TensorFlow signature a dict of named arrays
(`predict_tensors`). Concurrent requests of that kind merge as lists of instances do
(predictors/merging.py), on one rule: two requests merge only when their arrays can be
concatenated on the batch dimension, the first, into what the model would have been given for
the rows alone. So they must have the same input names, the same dtypes and the same shape past
the first dimension, and every input of a request the same number of rows; a TensorFlow call
must also name the same signature and outputs. Each merged output is cut back on its first
dimension; an output that does not have one row per merged row (a scalar, a statistic of the
whole batch) cannot be cut, and then every request runs again alone, as after a failed merged
call. Requests of `max_instances` rows or more run alone.

This is what TF Serving's own batching does with a signature's inputs (tensorflow_serving/
batching/batching_util.cc: tasks are concatenated on the 0th dimension, and only tasks whose
inputs agree in their other dimensions share a batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from predictors.merging import Merger, split_rows

#: numpy kinds an ArrayBatcher merges: booleans and numbers (what `takes_arrays` predictors get).
_NUMERIC = frozenset("biuf")


@dataclasses.dataclass(frozen=True, slots=True)
class TensorCall:
    """One `predict_tensors` call: named input arrays, the signature and the outputs wanted."""

    inputs: Mapping[str, np.ndarray]
    signature_name: str | None = None
    output_names: tuple[str, ...] | None = None


class ArrayBatcher(Merger):
    """Merges concurrent `predict(array)` calls, rows along the array's first axis."""

    def key(self, payload: Any) -> Hashable | None:
        if not isinstance(payload, np.ndarray) or payload.ndim == 0:
            return None
        if payload.dtype.kind not in _NUMERIC or not 0 < payload.shape[0] < self.max_instances:
            return None
        return (payload.dtype.str, payload.shape[1:])

    def size(self, payload: Any) -> int:
        return int(payload.shape[0])

    def merge(self, payloads: list[Any]) -> Any:
        return np.concatenate(payloads)

    def split(self, out: Any, sizes: list[int]) -> list[Any] | None:
        return split_rows(out, sizes)


class TensorBatcher(Merger):
    """Merges concurrent `predict_tensors` calls (payloads are TensorCalls; answers, dicts of
    output arrays)."""

    def key(self, payload: Any) -> Hashable | None:
        rows = None
        shapes: list[tuple[str, str, tuple[int, ...]]] = []
        for name, array in payload.inputs.items():
            if not isinstance(array, np.ndarray) or array.ndim == 0:
                return None
            if rows is None:
                rows = array.shape[0]
            elif array.shape[0] != rows:
                return None
            shapes.append((name, array.dtype.str, array.shape[1:]))
        if rows is None or not 0 < rows < self.max_instances:
            return None
        shapes.sort()
        return (payload.signature_name, payload.output_names, *shapes)

    def size(self, payload: Any) -> int:
        return int(next(iter(payload.inputs.values())).shape[0])

    def merge(self, payloads: list[Any]) -> Any:
        head = payloads[0]
        inputs = {name: np.concatenate([p.inputs[name] for p in payloads]) for name in head.inputs}
        return TensorCall(inputs, head.signature_name, head.output_names)

    def split(self, out: Any, sizes: list[int]) -> list[Any] | None:
        total = sum(sizes)
        outputs = {name: np.asarray(value) for name, value in out.items()}
        if any(array.ndim == 0 or array.shape[0] != total for array in outputs.values()):
            return None
        parts, start = [], 0
        for size in sizes:
            parts.append({name: array[start:start + size] for name, array in outputs.items()})
            start += size
        return parts
