"""XGBOOST: boosters from model.bst (or pickled boosters / XGBModel estimators), through a DMatrix.

The DMatrix's missing value is NaN, so `NaN` and `null` in a request row both mean "missing", as
in AI Platform. Thread policy: every predict call is limited to `xgboost_nthread` OpenMP threads
(default 1, setting MLEMU_XGBOOST_NTHREAD). Concurrency comes from gunicorn's workers and threads;
letting each call start one OpenMP thread per core oversubscribes the CPUs as soon as calls overlap
(bench/RESULTS.md measures both, "XGBoost thread policy"; 0 means XGBoost's default).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from errors import ModelLoadError, PredictionFailed
from predictors import XGBOOST, find_model_file, load_pickled, options, register
from predictors.base import Predictor, Signature, TensorSpec


@register
class XGBoostPredictor(Predictor):
    framework = XGBOOST
    batchable = True

    def __init__(self, booster: Any) -> None:
        import xgboost

        self._xgb = xgboost
        self._booster = booster
        self._nthread = int(options().get("xgboost_nthread", 1))
        booster.set_param({"nthread": self._nthread})
        self._feature_names = booster.feature_names

    @classmethod
    def from_path(cls, model_dir: str) -> XGBoostPredictor:
        path, _ = find_model_file(model_dir, XGBOOST)
        if path.endswith(".bst"):
            import xgboost

            booster = xgboost.Booster()
            try:
                # From a buffer XGBoost tells JSON from UBJSON by content; from a path it guesses
                # by the extension, which `.bst` does not name.
                with open(path, "rb") as f:
                    booster.load_model(bytearray(f.read()))
            except Exception as exc:  # noqa: BLE001 - xgboost raises XGBoostError for bad files
                raise ModelLoadError(f"Could not load the model: {path}. {exc}") from None
            return cls(booster)
        return cls.from_object(load_pickled(path), model_dir)

    @classmethod
    def from_object(cls, obj: Any, model_dir: str = "") -> XGBoostPredictor:
        import xgboost

        if isinstance(obj, xgboost.XGBModel):
            obj = obj.get_booster()
        if not isinstance(obj, xgboost.Booster):
            raise ModelLoadError(
                f"The model in {model_dir} is a {type(obj).__name__}, not an XGBoost Booster."
            )
        return cls(obj)

    def predict(self, instances: list[Any], **kwargs: Any) -> Any:
        try:
            data = np.asarray(instances, dtype=np.float32)
            if data.ndim == 1:
                raise ValueError(
                    f"Expected each instance to be a list of features, got a 1-D array {instances!r:.80}"
                )
            names = (
                self._feature_names
                if self._feature_names and data.shape[-1] == len(self._feature_names)
                else None
            )
            matrix = self._xgb.DMatrix(
                data, missing=np.nan, nthread=self._nthread, feature_names=names
            )
            result = self._booster.predict(matrix, validate_features=True)
        except Exception as exc:  # noqa: BLE001 - the model's own error is the caller's answer
            raise PredictionFailed(f"Exception during xgboost prediction: {exc}") from None
        return result.tolist()

    def signature(self) -> Signature:
        n_features = self._booster.num_features()
        return Signature(
            inputs=(TensorSpec("input-0", "FP32", (-1, n_features)),),
            outputs=(TensorSpec("output-0", "FP32", (-1,)),),
        )
