"""Custom prediction routines: a user's `module.Class` loaded from the version's own packages.

The class needs `from_path(cls, model_dir)` and `predict(self, instances, **kwargs)`, exactly as
AI Platform's custom prediction routines; or, for Vertex AI's Custom Prediction Routines,
`load(artifacts_uri)` and `predict(...)` (with optional `preprocess`/`postprocess`:
RoutinePredictor). Packages are made importable for this load only: their
import roots go on sys.path while the module is imported and `from_path` runs (so pickles that
reference user classes resolve), then come off again, and the modules they provided are dropped
from sys.modules, so two versions may ship modules with the same name. Nothing is installed into
the server's environment; a package's own dependencies must already be importable.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from core.errors import ModelLoadError, PredictionFailed
from predictors.base import Predictor

# sys.path and sys.modules are process-global; loads of custom code take turns.
_IMPORT_LOCK = threading.Lock()


class CustomPredictor(Predictor):
    """Adapter around a user object: any extra request key is passed through as a kwarg."""

    accepted_parameters = None

    def __init__(self, user_predictor: Any, class_path: str) -> None:
        self._user = user_predictor
        self._predict = user_predictor.predict
        self.class_path = class_path
        # Opt-in: the user's class declares its predictions row-independent (docs/performance.md).
        self.batchable = getattr(user_predictor, "batchable", False) is True

    @classmethod
    def from_path(cls, model_dir: str) -> Predictor:
        raise ModelLoadError("A custom predictor needs predictionClass; use predictors.load().")

    def predict(self, instances: list[Any], **kwargs: Any) -> Any:
        try:
            return self._predict(instances, **kwargs)
        except PredictionFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - user code's error is the caller's answer
            raise PredictionFailed(f"{type(exc).__name__}: {exc}") from None

    @property
    def user_predictor(self) -> Any:
        return self._user


class RoutinePredictor(CustomPredictor):
    """A Vertex AI Custom Prediction Routine (google-cloud-aiplatform's prediction.Predictor
    contract: `load(artifacts_uri)`, then `postprocess(predict(preprocess(request body)))`,
    google/cloud/aiplatform/prediction/predictor.py): the request body it sees is
    `{"instances": [...]}` plus `"parameters"` when there are any, and the `predictions` of the
    body it answers are the predictions (the whole answer when it has none)."""

    def __init__(self, user_predictor: Any, class_path: str) -> None:
        super().__init__(user_predictor, class_path)
        identity = lambda value: value  # noqa: E731 - the steps a routine may leave out
        self._pre = getattr(user_predictor, "preprocess", identity)
        self._post = getattr(user_predictor, "postprocess", identity)
        self._predict = self._routine

    def _routine(self, instances: list[Any], **parameters: Any) -> Any:
        body: dict[str, Any] = {"instances": instances}
        if parameters:
            body["parameters"] = parameters
        answer = self._post(self._user.predict(self._pre(body)))
        return answer["predictions"] if isinstance(answer, dict) and "predictions" in answer \
            else answer


def _load_routine(user_cls: Any, model_dir: str, prediction_class: str) -> CustomPredictor:
    """A Custom Prediction Routine's class: instantiated without arguments, then loaded with the
    model directory as its artifacts URI."""
    try:
        user_obj = user_cls()
        user_obj.load(model_dir)
    except Exception as exc:  # noqa: BLE001 - the routine's own failure, reported as a load error
        raise ModelLoadError(
            f"{prediction_class}.load() failed: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(user_obj, "predict", None)):
        raise ModelLoadError(f"{prediction_class} has no predict().")
    return RoutinePredictor(user_obj, prediction_class)


def _under(path: str | None, roots: Sequence[str]) -> bool:
    if not path:
        return False
    real = os.path.realpath(path)
    return any(real.startswith(os.path.realpath(root) + os.sep) for root in roots)


def load(model_dir: str, prediction_class: str, import_roots: Sequence[str]) -> CustomPredictor:
    """Import `prediction_class` from `import_roots` and call its from_path(model_dir)."""
    module_name, _, class_name = prediction_class.rpartition(".")
    if not module_name or not class_name:
        raise ModelLoadError(
            f"predictionClass {prediction_class!r} must be of the form 'module.ClassName'."
        )
    roots = [os.path.abspath(r) for r in import_roots]
    top = module_name.split(".")[0]
    with _IMPORT_LOCK:
        saved_path = list(sys.path)
        # Other threads import while this runs (the lock orders custom loads only): read
        # sys.modules from one snapshot each time (a copy made in C, without a thread switch)
        # rather than iterating the live dict, which another import may grow meanwhile.
        before = dict(sys.modules)
        # A server module with the same top-level name would shadow the user's; set it aside.
        shadowed = {
            name: mod for name, mod in before.items()
            if (name == top or name.startswith(top + "."))
            and not _under(getattr(mod, "__file__", None), roots)
        }
        for name in shadowed:
            sys.modules.pop(name, None)
        sys.path[:0] = roots
        try:
            importlib.invalidate_caches()
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:  # noqa: BLE001 - any import failure is the package's fault
                raise ModelLoadError(
                    f"Could not import module {module_name!r} for predictionClass "
                    f"{prediction_class!r}: {type(exc).__name__}: {exc}"
                ) from None
            user_cls = getattr(module, class_name, None)
            if user_cls is None:
                raise ModelLoadError(
                    f"Module {module_name!r} has no class {class_name!r} (predictionClass "
                    f"{prediction_class!r})."
                )
            if not callable(getattr(user_cls, "from_path", None)) and \
                    callable(getattr(user_cls, "load", None)):
                return _load_routine(user_cls, model_dir, prediction_class)
            for method in ("from_path", "predict"):
                if not callable(getattr(user_cls, method, None)):
                    raise ModelLoadError(
                        f"predictionClass {prediction_class!r} must define {method}(); it does not."
                    )
            try:
                user_obj = user_cls.from_path(model_dir)
            except Exception as exc:  # noqa: BLE001
                raise ModelLoadError(
                    f"{prediction_class}.from_path({model_dir!r}) failed: {type(exc).__name__}: {exc}"
                ) from None
            if not callable(getattr(user_obj, "predict", None)):
                raise ModelLoadError(
                    f"{prediction_class}.from_path() returned {type(user_obj).__name__}, "
                    "which has no predict()."
                )
            return CustomPredictor(user_obj, prediction_class)
        finally:
            sys.path[:] = saved_path
            for name, mod in dict(sys.modules).items():
                if name not in before and (
                        name == top or _under(getattr(mod, "__file__", None), roots)):
                    sys.modules.pop(name, None)
            sys.modules.update(shadowed)
