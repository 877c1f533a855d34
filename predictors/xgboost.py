"""XGBOOST: boosters from model.bst (or pickled boosters / XGBModel estimators), through a DMatrix.

The DMatrix's missing value is NaN, so `NaN` and `null` in a request row both mean "missing", as
in AI Platform. Thread policy: every predict call is limited to `xgboost_nthread` OpenMP threads
(default 1, setting MLEMU_XGBOOST_NTHREAD). Concurrency comes from gunicorn's workers and threads;
letting each call start one OpenMP thread per core oversubscribes the CPUs as soon as calls overlap
(bench/RESULTS.md measures both, "XGBoost thread policy"; 0 means XGBoost's default).

Loading a booster is held to `xgboost_nthread` threads too: XGBoost parses a model's trees in an
OpenMP parallel region sized by its thread-local global `nthread` (0: every core), which a
booster's own `nthread` parameter does not reach before the model is in it. Parsed in parallel,
a model of tens of trees costs several times the CPU of a serial parse (bench/notes/thousand.md).

One exception: a call of `WIDE_CALL_ROWS` rows or more, while no other such call runs in this
process, uses every CPU the process may use (a second copy of the booster set to that many
threads, made on the first such call). One large request then gets the machine's cores, as
under XGBoost's default, and concurrent large requests cannot multiply threads: the others run
with `xgboost_nthread`.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

import numpy as np

from core.errors import ModelLoadError, PredictionFailed
from core.sizing import available_cpus
from predictors import XGBOOST, find_model_file, load_pickled, register
from predictors.base import Predictor, PredictorOptions, Signature, TensorSpec

#: Rows from which one call may use every CPU (see the module docstring): large enough that
#: starting the OpenMP threads costs little next to the call (bench/RESULTS.md, "XGBoost large
#: calls").
WIDE_CALL_ROWS = 1000
#: Rows from which float32_rows converts through np.fromiter (below, np.asarray is as fast).
FAST_CONVERT_ROWS = 256


def float32_rows(instances: list[Any] | np.ndarray) -> np.ndarray:
    """`np.asarray(instances, dtype=np.float32)`, faster for rows of equal length.

    np.fromiter over the flattened rows converts exactly as asarray does with a dtype given
    (None -> NaN, numbers and numeric strings -> float32) in less time for large requests
    (`FAST_CONVERT_ROWS` rows or more; bench/RESULTS.md, "XGBoost large calls"); anything it
    cannot take (ragged or nested rows, dicts, bad values) goes to np.asarray, whose result or
    error is then the answer.
    """
    if len(instances) >= FAST_CONVERT_ROWS and type(instances[0]) is list:
        width = len(instances[0])
        if width and all(type(row) is list and len(row) == width for row in instances):
            try:
                flat = np.fromiter(itertools.chain.from_iterable(instances), np.float32,
                                   count=width * len(instances))
            except (TypeError, ValueError):
                pass
            else:
                return flat.reshape(len(instances), width)
    return np.asarray(instances, dtype=np.float32)


def _booster_name(booster: Any) -> str:
    """The booster type of a loaded model (gbtree, dart, gblinear), from its saved config."""
    try:
        return str(json.loads(booster.save_config())["learner"]["gradient_booster"]["name"])
    except (ValueError, KeyError, TypeError):
        return ""


@register
class XGBoostPredictor(Predictor):
    framework = XGBOOST
    batchable = True
    takes_arrays = True

    def __init__(self, booster: Any) -> None:
        import xgboost

        self._xgb = xgboost
        self._booster = booster
        self._nthread = PredictorOptions().xgboost_nthread
        booster.set_param({"nthread": self._nthread})
        self._feature_names = booster.feature_names
        #: gbtree only: the booster types whose in-place prediction XGBoost documents as the
        #: DMatrix path's (dart drops trees at training only, gblinear has its own path).
        self._inplace = _booster_name(booster) == "gbtree"
        self._num_features = int(booster.num_features())
        #: Threads for a large call; 0 (XGBoost's default) or 1 CPU: no second booster.
        self._wide_nthread = max(1, int(available_cpus()))
        self._wide_booster: Any = None
        self._wide_lock = threading.Lock()  # held by the one large call using every CPU

    def configure(self, options: PredictorOptions) -> None:
        self._nthread = int(options.xgboost_nthread)
        self._booster.set_param({"nthread": self._nthread})

    @classmethod
    def load_configured(cls, model_dir: str, options: PredictorOptions) -> Predictor:
        """The base class's load with XGBoost's global thread count at `xgboost_nthread` (module
        docstring; 0 keeps XGBoost's default)."""
        nthread = int(options.xgboost_nthread)
        if nthread <= 0:
            return super().load_configured(model_dir, options)
        import xgboost

        # XGBoost's global configuration is thread-local (include/xgboost/global_config.h in
        # dmlc/xgboost: GlobalConfigThreadLocalStore), so this limits this load only. Leaving
        # the context cannot put back the default 0 (XGBoost 3.2 keeps the last positive value
        # in this thread); every XGBoost call of this module passes its thread count itself.
        with xgboost.config_context(nthread=nthread):
            return super().load_configured(model_dir, options)

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

    def predict(self, instances: list[Any] | np.ndarray, **kwargs: Any) -> Any:
        try:
            data = float32_rows(instances)
            if data.ndim == 1:
                raise ValueError(
                    f"Expected each instance to be a list of features, got a 1-D array {instances!r:.80}"
                )
            if data.ndim == 2 and data.shape[1] != self._num_features:
                raise ValueError(self._mismatch(data.shape[1]))
            names = (
                self._feature_names
                if self._feature_names and data.shape[-1] == len(self._feature_names)
                else None
            )
            if len(data) >= WIDE_CALL_ROWS and self._wide_lock.acquire(blocking=False):
                try:
                    result = self._run(self._wide(), data, names, self._wide_nthread)
                finally:
                    self._wide_lock.release()
            else:
                result = self._run(self._booster, data, names, self._nthread)
        except Exception as exc:  # noqa: BLE001 - the model's own error is the caller's answer
            raise PredictionFailed(f"Exception during xgboost prediction: {exc}") from None
        return result.tolist()

    def _mismatch(self, width: int) -> str:
        """What AI Platform answers for rows of the wrong length (seed 004: instance dimensions
        must match the model's). Its runtime builds `xgb.DMatrix(inputs)` without names, so
        XGBoost's own feature-name check refuses the rows (google-cloud-ml's
        sk_xg_prediction_lib.py XgboostClient.predict; the text is xgboost/core.py
        Booster._validate_features). Recent XGBoost accepts short rows and answers with a
        native backtrace for long ones, so the check is made here, for every length.
        """
        expected = list(self._feature_names or (f"f{i}" for i in range(self._num_features)))
        got = [f"f{i}" for i in range(width)]
        message = f"feature_names mismatch: {expected} {got}"
        missing = [name for name in expected if name not in got]
        extra = [name for name in got if name not in expected]
        if missing:
            message += "\nexpected " + ", ".join(missing) + " in input data"
        if extra:
            message += "\ntraining data did not have the following fields: " + ", ".join(extra)
        return message

    def _run(self, booster: Any, data: np.ndarray, names: Any, nthread: int) -> Any:
        if self._inplace:
            # A tree booster predicts from the array itself: the same predictor and outputs as
            # through a DMatrix (tests/predictors/test_sklearn_xgboost.py compares them), without
            # building one, which is most of a one-row call's cost. Widths are checked above.
            try:
                return booster.inplace_predict(data, missing=np.nan, validate_features=False)
            except Exception:  # noqa: BLE001, S110 - the DMatrix path below answers in XGBoost's words
                pass
        matrix = self._xgb.DMatrix(data, missing=np.nan, nthread=nthread, feature_names=names)
        return booster.predict(matrix, validate_features=True)

    def _wide(self) -> Any:
        """The booster for large calls (called with _wide_lock held)."""
        if self._nthread == 0 or self._wide_nthread <= self._nthread:
            return self._booster  # already as wide as it gets
        if self._wide_booster is None:
            wide = self._booster.copy()
            wide.set_param({"nthread": self._wide_nthread})
            self._wide_booster = wide
        return self._wide_booster

    def signature(self) -> Signature:
        n_features = self._booster.num_features()
        return Signature(
            inputs=(TensorSpec("input-0", "FP32", (-1, n_features)),),
            outputs=(TensorSpec("output-0", "FP32", (-1,)),),
        )
