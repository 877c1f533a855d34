"""SCIKIT_LEARN: estimators and pipelines from model.joblib / model.pkl, served with `predict`.

AI Platform calls `predict` (never `predict_proba`) on `np.asarray(instances)`; a failure inside
the model becomes "Prediction failed: Exception during sklearn prediction: <message>".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.errors import ModelLoadError, PredictionFailed
from predictors import SCIKIT_LEARN, find_model_file, load_pickled, register
from predictors.base import Predictor, Signature, TensorSpec


def _datatype(dtype: np.dtype) -> str:
    if dtype.kind in "USO":
        return "BYTES"
    if dtype.kind == "b":
        return "BOOL"
    if dtype.kind in "iu":
        return "INT64"
    return "FP64"


@register
class SklearnPredictor(Predictor):
    framework = SCIKIT_LEARN
    batchable = True
    takes_arrays = True

    def __init__(self, model: Any) -> None:
        self._model = model
        self._predict = model.predict

    @classmethod
    def from_path(cls, model_dir: str) -> SklearnPredictor:
        path, _ = find_model_file(model_dir, SCIKIT_LEARN)
        return cls.from_object(load_pickled(path), model_dir)

    @classmethod
    def from_object(cls, obj: Any, model_dir: str = "") -> SklearnPredictor:
        if not callable(getattr(obj, "predict", None)):
            raise ModelLoadError(
                f"The scikit-learn model in {model_dir} ({type(obj).__name__}) has no predict method."
            )
        return cls(obj)

    def predict(self, instances: list[Any] | np.ndarray, **kwargs: Any) -> Any:
        try:
            result = self._predict(np.asarray(instances))
        except Exception as exc:  # noqa: BLE001 - the model's own error is the caller's answer
            raise PredictionFailed(f"Exception during sklearn prediction: {exc}") from None
        return result.tolist() if hasattr(result, "tolist") else list(result)

    def signature(self) -> Signature:
        n_features = getattr(self._model, "n_features_in_", None)
        classes = getattr(self._model, "classes_", None)
        out_type = _datatype(np.asarray(classes).dtype) if classes is not None else "FP64"
        in_shape = (-1, int(n_features)) if n_features is not None else (-1, -1)
        return Signature(
            inputs=(TensorSpec("input-0", "FP64", in_shape),),
            outputs=(TensorSpec("output-0", out_type, (-1,)),),
        )
