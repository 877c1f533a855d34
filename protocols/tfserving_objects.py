"""A non-TensorFlow predictor's answer in TF Serving's `:predict` layout.

TF Serving answers every model the same way (tensorflow_serving/util/json_tensor.cc,
MakeRowFormatJsonFromTensors and MakeColumnarFormatJsonFromTensors; seed 000, "Response format"):
rows are `{"predictions": [...]}` with, when the model has several outputs, one object per
instance keyed by output name; columns are `{"outputs": ...}`, the one output's values or one
object keyed by output name whose values are that output's whole batch. Both come from
rapidjson's PrettyWriter. scikit-learn, XGBoost and custom predictors answer a list: one value
per instance (one output), or one object per instance (several outputs, by name). These are
turned into the outputs TF Serving would have had, so every framework gets TensorFlow's layout;
what no tensor can hold (ragged lists, nested objects, mixed types) keeps its shape but is written
by the same PrettyWriter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from predictors.rapidjson_writer import PrettyWriter, encode, quote, write_decimal
from protocols import tfserving_json as writer

#: numpy kinds a TF Serving tensor of JSON values can be (bool, integers, floats, strings).
_TENSOR_KINDS = "biufU"


def predict_body(predictions: Any, rows: bool) -> bytes:
    """The `:predict` body of a predictor's answer (`rows`: the request sent `instances`)."""
    if hasattr(predictions, "tolist"):
        predictions = predictions.tolist()
    elif not isinstance(predictions, (list, dict)):
        predictions = list(predictions)  # a custom predictor may yield its predictions
    outputs = _as_outputs(predictions)
    if outputs is not None:
        return writer.predict_rows(outputs) if rows else writer.predict_columns(outputs)
    if not rows and _keyed(predictions):  # columnar: one object by output name
        predictions = {key: [item[key] for item in predictions] for key in predictions[0]}
    return pretty({"predictions" if rows else "outputs": predictions})


def _keyed(predictions: Any) -> bool:
    """One object per instance, all with the same keys: several named outputs."""
    if not isinstance(predictions, list) or not predictions:
        return False
    first = predictions[0]
    return (isinstance(first, dict) and bool(first)
            and all(isinstance(p, dict) and p.keys() == first.keys() for p in predictions))


def _as_outputs(predictions: Any) -> dict[str, np.ndarray] | None:
    """The output tensors the predictions stand for, or None where no tensor holds them."""
    if not isinstance(predictions, list) or not predictions:
        return None
    if _keyed(predictions):
        columns = {str(key): _tensor([p[key] for p in predictions]) for key in predictions[0]}
        if any(column is None for column in columns.values()):
            return None
        return columns  # type: ignore[return-value]
    single = _tensor(predictions)
    return None if single is None else {"output": single}


def _tensor(values: list[Any]) -> np.ndarray | None:
    """Values as one rectangular array of a tensor type; None for ragged or mixed values (numpy
    would turn `[1, "a"]` into two strings)."""
    try:
        array = np.asarray(values)
    except (ValueError, TypeError):
        return None
    if array.dtype.kind not in _TENSOR_KINDS:
        return None
    if array.dtype.kind == "U" and not all(
            isinstance(v, str) for v in np.asarray(values, dtype=object).reshape(-1)):
        return None
    return array


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return write_decimal(value, False)
    if isinstance(value, bytes):
        return quote(value.decode("utf-8", "surrogateescape"))
    return quote(str(value))


def pretty(document: Any) -> bytes:
    """Any JSON value in rapidjson's PrettyWriter layout (4-space indent, one value a line)."""
    out = PrettyWriter()
    stack: list[tuple[str, Any]] = [("value", document)]  # iterative: values may nest deeply
    while stack:
        kind, item = stack.pop()
        if kind == "end":
            out.end()
        elif kind == "key":
            out.key(str(item))
        elif isinstance(item, (list, tuple, dict)):
            out.start(not isinstance(item, dict))
            stack.append(("end", None))
            children: list[tuple[str, Any]] = []
            pairs = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            for name, child in pairs:
                if name is not None:
                    children.append(("key", name))
                children.append(("value", child))
            stack.extend(reversed(children))
        else:
            out.value(_scalar(item))
    return encode(out.text())
