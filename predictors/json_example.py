"""JSON objects -> tf.Example features, by TF Serving's rules for `:classify` and `:regress`.

tensorflow_serving/util/json_tensor.cc (AddValueToFeature, MakeExampleFromJsonObject): a feature
is a value or a list of values of one kind; a JSON number with a decimal point is a float, one
without is an int64, true/false are int64 1/0, strings and `{"b64": ...}` are bytes. The result is
plain Python (name -> (kind, values)); the TensorFlow predictor builds the protos.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.errors import PredictionFailed
from predictors.json_tensor import decode_b64, is_b64, json_type


def _feature_value(value: Any, name: str) -> tuple[str, Any]:
    if value is None or isinstance(value, list) or (isinstance(value, dict) and not is_b64(value)):
        raise PredictionFailed(f"Feature: {name} has element with unexpected JSON type: "
                               f"{json_type(value)}")
    if isinstance(value, bool):
        return "int64", int(value)
    if isinstance(value, dict):
        return "bytes", decode_b64(value)
    if isinstance(value, str):
        return "bytes", value.encode()
    if isinstance(value, float):  # GetFloat(): a static_cast, so beyond float range is inf
        with np.errstate(over="ignore"):
            return "float", float(np.float32(value))
    if not -(2 ** 63) <= value < 2 ** 63:
        raise PredictionFailed(f"Feature: {name} has uint64_t element. Only int64_t is supported.")
    return "int64", value


def example_features(obj: Any) -> dict[str, tuple[str, list[Any]]]:
    """A JSON object as tf.Example features: name -> (kind, values), kind float|int64|bytes."""
    if not isinstance(obj, dict):
        raise PredictionFailed(f"Example must be JSON object but got JSON {json_type(obj)}")
    features: dict[str, tuple[str, list[Any]]] = {}
    for name, content in obj.items():
        kind = ""
        values: list[Any] = []
        for item in content if isinstance(content, list) else [content]:
            item_kind, value = _feature_value(item, name)
            if kind and item_kind != kind:
                raise PredictionFailed(f"Unexpected element type in feature: {name} expecting type: "
                                       f"{kind}")
            kind = item_kind
            values.append(value)
        features[name] = (kind or "float", values)
    return features
