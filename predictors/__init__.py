"""Predictor registry: framework detection and loading, with heavy libraries imported lazily.

`import predictors` must stay cheap: scikit-learn, XGBoost and TensorFlow are imported only by the
framework module that needs them, and that module only when a model of its kind is loaded.

Detection follows AI Platform's file rules: `saved_model.pb|pbtxt` -> TENSORFLOW, `model.bst` ->
XGBOOST, `model.joblib|model.pkl` -> decided by the unpickled object; more than one model file in
a directory is an error naming them.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Any

from core.errors import ModelLoadError
from predictors.base import Predictor, PredictorOptions, Signature, TensorSpec

__all__ = [
    "FRAMEWORKS",
    "Predictor",
    "PredictorOptions",
    "Signature",
    "TensorSpec",
    "find_model_file",
    "load",
    "predictor_class",
    "register",
]

SCIKIT_LEARN = "SCIKIT_LEARN"
XGBOOST = "XGBOOST"
TENSORFLOW = "TENSORFLOW"

#: Framework -> module implementing it; imported on first use only.
_MODULES = {
    SCIKIT_LEARN: "predictors.sklearn",
    XGBOOST: "predictors.xgboost",
    TENSORFLOW: "predictors.tensorflow",
}
FRAMEWORKS = tuple(_MODULES)

#: Model file name -> framework it implies (None: decided by the unpickled object).
MODEL_FILES: dict[str, str | None] = {
    "saved_model.pb": TENSORFLOW,
    "saved_model.pbtxt": TENSORFLOW,
    "model.bst": XGBOOST,
    "model.joblib": None,
    "model.pkl": None,
}
#: Which model files each framework accepts (AI Platform's rules).
ACCEPTED_FILES = {
    TENSORFLOW: ("saved_model.pb", "saved_model.pbtxt"),
    XGBOOST: ("model.bst", "model.joblib", "model.pkl"),
    SCIKIT_LEARN: ("model.joblib", "model.pkl"),
}

#: Framework -> its predictor class: a table of code (each class registers itself when its
#: module is imported), the same for every emulator; per-emulator options go to `load`.
_REGISTRY: dict[str, type[Predictor]] = {}


def register(cls: type[Predictor]) -> type[Predictor]:
    """Class decorator: a built-in predictor registers itself under its `framework`."""
    _REGISTRY[cls.framework] = cls
    return cls


def predictor_class(framework: str) -> type[Predictor]:
    framework = framework.upper()
    if framework not in _MODULES:
        raise ModelLoadError(
            f"Unsupported framework {framework!r}; supported: {', '.join(FRAMEWORKS)}."
        )
    if framework not in _REGISTRY:
        importlib.import_module(_MODULES[framework])
    return _REGISTRY[framework]


def find_model_file(model_dir: str, framework: str | None = None) -> tuple[str, str | None]:
    """The one model file in `model_dir` and the framework it implies (None: look inside)."""
    if not os.path.isdir(model_dir):
        raise ModelLoadError(f"Model directory {model_dir} does not exist or is not a directory.")
    present = sorted(name for name in MODEL_FILES if os.path.isfile(os.path.join(model_dir, name)))
    if framework is not None:
        accepted = ACCEPTED_FILES.get(framework.upper(), ())
        present = [name for name in present if name in accepted] or present
    if not present:
        wanted = ", ".join(ACCEPTED_FILES.get((framework or "").upper(), tuple(MODEL_FILES)))
        raise ModelLoadError(f"Could not find a model file in {model_dir}: expected one of {wanted}.")
    if len(present) > 1:
        raise ModelLoadError(
            f"More than one model file found in {model_dir}: {', '.join(present)}. "
            "Keep exactly one model file in the model directory."
        )
    name = present[0]
    implied = MODEL_FILES[name]
    if framework is not None and name not in ACCEPTED_FILES.get(framework.upper(), (name,)):
        raise ModelLoadError(
            f"Framework {framework.upper()} cannot serve {name}; it expects "
            f"{' or '.join(ACCEPTED_FILES[framework.upper()])}."
        )
    return os.path.join(model_dir, name), implied


def load_pickled(path: str) -> Any:
    """model.joblib through joblib, model.pkl through pickle, as AI Platform does."""
    import pickle

    # Outside the try: a missing joblib is this installation's problem, not the model file's
    # (`app.py predict` then says which Python lacks it and how to fix that).
    import joblib

    try:
        if path.endswith(".joblib"):
            return joblib.load(path)
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 - loading the user's own model is the point
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad model file
        raise ModelLoadError(
            f"Could not load the model: {path}. {type(exc).__name__}: {exc}"
        ) from None


def framework_of(obj: Any) -> str:
    """The framework serving an unpickled object: XGBoost boosters/estimators, else scikit-learn."""
    module = type(obj).__module__ or ""
    return XGBOOST if module.split(".")[0] == "xgboost" else SCIKIT_LEARN


def load(
    model_dir: str,
    framework: str | None = None,
    prediction_class: str | None = None,
    package_dirs: Sequence[str] = (),
    options: PredictorOptions | None = None,
) -> tuple[Predictor, str]:
    """Load a version's predictor, configured with `options` (the loading emulator's; defaults
    otherwise); returns it with the framework that was used ("" for custom)."""
    options = options or PredictorOptions()
    if prediction_class:
        from predictors import custom

        predictor = custom.load(model_dir, prediction_class, package_dirs)
        predictor.configure(options)
        return predictor, framework or ""
    path, implied = find_model_file(model_dir, framework)
    if framework is None:
        framework = implied
    if framework is None:
        obj = load_pickled(path)
        framework = framework_of(obj)
        predictor = predictor_class(framework).from_object(obj, model_dir)  # type: ignore[attr-defined]
        predictor.configure(options)
        return predictor, framework
    return predictor_class(framework).load_configured(model_dir, options), framework.upper()
