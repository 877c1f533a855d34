"""Between request instances and the flat feature vectors the attribution methods work on.

Each metadata input is found in an instance (a key of a dict instance, or the whole instance when
the model takes one input), read as an array, and flattened; the explained features of an instance
are the concatenation, each element one player for sampled Shapley and one coordinate for
integrated gradients. `assemble` writes perturbed vectors back into copies of the instance, so the
model sees the request format it was deployed with. `score` picks the explained output's value
out of a prediction: the output named by the metadata when predictions are dicts (TensorFlow's
named outputs), then the predicted class (argmax; `label_index`) when the value is a vector, as
the service does when no output index is requested.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from core.errors import FailedPrecondition, InvalidArgument
from explainers.metadata import Metadata
from predictors.base import Predictor

#: label_index for a scalar output (explainable_ai_sdk common/constants.py SCALAR_OUTPUT_INDEX).
SCALAR_INDEX = -1


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    key: str | None  # key of a dict instance; None: the instance itself
    baselines: tuple[Any, ...]
    index_feature_mapping: tuple[str, ...] = ()  # names of the last axis' indices (metadata.py)


@dataclasses.dataclass(frozen=True)
class Layout:
    features: tuple[Feature, ...]
    output_key: str | None  # key of a dict prediction; None: the prediction itself
    output_alias: str | None = None  # TensorFlow: the signature output explained

    # -- reading instances --------------------------------------------------------------

    def _value(self, instance: Any, feature: Feature) -> Any:
        if feature.key is None or (len(self.features) == 1 and not isinstance(instance, dict)):
            return instance  # the instance is the one input (a bare row, TF's short row format)
        if not isinstance(instance, dict) or feature.key not in instance:
            raise InvalidArgument(f"Each instance must be an object with the key {feature.key!r} "
                                  f"(feature {feature.name!r} of {FILE}).")
        return instance[feature.key]

    def arrays(self, instance: Any) -> list[np.ndarray]:
        """The instance's value of each feature, numeric as float64, anything else as objects."""
        out = []
        for feature in self.features:
            value = self._value(instance, feature)
            if isinstance(value, dict) and set(value) != {"b64"}:  # {"b64": ...}: one binary value
                raise InvalidArgument(
                    f"The instances are objects: each input of {FILE} must name its key with "
                    f"input_tensor_name (input {feature.name!r} does not).")
            array = np.asarray(value)
            if array.dtype.kind in "iufb":
                array = array.astype(np.float64)
            elif array.dtype.kind != "O":
                array = np.asarray(value, dtype=object)
            out.append(array)
        return out

    def baselines(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Every baseline as a flat vector (one per baseline; zeros when none is given)."""
        count = max([len(f.baselines) for f in self.features] + [1])
        vectors = []
        for i in range(count):
            parts = []
            for feature, array in zip(self.features, arrays, strict=True):
                given = feature.baselines[i % len(feature.baselines)] if feature.baselines else 0.0
                try:
                    base = np.broadcast_to(np.asarray(given, dtype=array.dtype), array.shape)
                except (ValueError, TypeError):
                    raise FailedPrecondition(
                        f"Invalid {FILE}: a baseline of input {feature.name!r} does not fit the "
                        f"instance's shape {list(array.shape)}.") from None
                parts.append(base.reshape(-1))
            vectors.append(np.concatenate(parts) if parts else np.zeros(0))
        return vectors

    @staticmethod
    def flat(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([a.reshape(-1) for a in arrays])

    # -- writing instances --------------------------------------------------------------

    def assemble(self, instance: Any, shapes: list[tuple[int, ...]], vectors: np.ndarray) -> list[Any]:
        """Copies of `instance` carrying each row of `vectors` as its feature values."""
        sizes = [int(np.prod(s)) for s in shapes]
        bounds = np.cumsum([0, *sizes])
        out = []
        for row in vectors:
            new = dict(instance) if isinstance(instance, dict) else instance
            for feature, shape, lo, hi in zip(self.features, shapes, bounds, bounds[1:], strict=False):
                value = row[lo:hi].reshape(shape).tolist()
                if feature.key is None or not isinstance(new, dict):
                    new = value
                else:
                    new[feature.key] = value
            out.append(new)
        return out

    def split(self, vector: np.ndarray, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
        """A flat attribution vector as {feature name: value of the input's shape}; an input
        with an index_feature_mapping as {mapped name: its index's values, flat}."""
        result, start = {}, 0
        for feature, shape in zip(self.features, shapes, strict=True):
            size = int(np.prod(shape))
            values = vector[start:start + size].reshape(shape)
            start += size
            names = feature.index_feature_mapping
            if not names:
                result[feature.name] = values.tolist()
                continue
            if not shape or shape[-1] != len(names):
                raise FailedPrecondition(
                    f"Invalid {FILE}: index_feature_mapping of input {feature.name!r} names "
                    f"{len(names)} features, but the instance's last axis has "
                    f"{shape[-1] if shape else 0} (shape {list(shape)}).")
            for index, name in enumerate(names):
                result[name] = values[..., index].reshape(-1).tolist()
        return result

    # -- reading predictions ------------------------------------------------------------

    def output(self, prediction: Any) -> np.ndarray:
        if self.output_key is not None:
            if not isinstance(prediction, dict) or self.output_key not in prediction:
                raise FailedPrecondition(f"The model's predictions have no output "
                                         f"{self.output_key!r} (outputs of {FILE}).")
            prediction = prediction[self.output_key]
        try:
            value = np.asarray(prediction, dtype=np.float64)
        except (TypeError, ValueError):
            raise FailedPrecondition("The explained output must be numeric; the model predicted "
                                     f"{str(prediction)[:100]}.") from None
        if value.ndim > 1:
            raise FailedPrecondition("mlemu explains scalar or vector outputs; the explained output "
                                     f"has shape {list(value.shape)}.")
        return value

    def label(self, prediction: Any) -> int:
        value = self.output(prediction)
        return SCALAR_INDEX if value.ndim == 0 else int(np.argmax(value))

    def score(self, prediction: Any, label: int) -> float:
        value = self.output(prediction)
        return float(value if label == SCALAR_INDEX else value[label])


FILE = "explanation_metadata.json"


def layout(metadata: Metadata, predictor: Predictor, signature_name: Any = None) -> Layout:
    """Where each metadata input and the output live in this model's instances and predictions."""
    inputs: dict[str, str] = {}
    outputs: dict[str, str] = {}
    select = getattr(predictor, "select", None)  # TensorFlow: tensor names -> signature aliases
    if select is not None:
        sig = select(signature_name)
        inputs = {info.tensor: alias for alias, info in sig.inputs.items()}
        inputs.update({alias: alias for alias in sig.inputs})
        outputs = {info.tensor: alias for alias, info in sig.outputs.items()}
        outputs.update({alias: alias for alias in sig.outputs})

    def key(tensor: str | None, name: str, table: dict[str, str]) -> str | None:
        if select is None:
            return tensor
        tensor = tensor or name
        if tensor not in table:
            raise FailedPrecondition(f"Invalid {FILE}: {tensor!r} is not a tensor of the serving "
                                     f"signature (it has {', '.join(sorted(set(table.values())))}).")
        return table[tensor]

    features = tuple(Feature(m.name, key(m.tensor_name, m.name, inputs), m.baselines,
                             m.index_feature_mapping) for m in metadata.inputs)
    if len(features) > 1 and any(f.key is None for f in features):
        raise FailedPrecondition(f"Invalid {FILE}: with several inputs, each must name a key of "
                                 "the instances (input_tensor_name).")
    out = metadata.output
    alias = output_key = key(out.tensor_name, out.name, outputs)
    if select is not None and len(set(outputs.values())) == 1:
        output_key = None  # a one-output signature predicts bare values (TF's row format)
    return Layout(features, output_key, alias if select is not None else None)
