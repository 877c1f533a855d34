"""The Predictor contract: AI Platform's custom prediction routine interface.

Built-in frameworks implement it directly; user classes are wrapped by predictors/custom.py so
that user code written for AI Platform runs unchanged.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One named input or output as the serving protocols describe it.

    `datatype` uses the Open Inference Protocol names (FP32, INT64, BYTES, ...); -1 in `shape`
    marks a variable dimension (the batch dimension is always first).
    """

    name: str
    datatype: str
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()


@dataclasses.dataclass(frozen=True)
class PredictorOptions:
    """How an emulator runs the built-in predictors it loads (from its Settings; passed to
    predictors.load, so two emulators in one process may differ)."""

    #: OpenMP threads of one XGBoost call (MLEMU_XGBOOST_NTHREAD; see predictors/xgboost.py).
    xgboost_nthread: int = 1
    #: Threads of one TensorFlow session call (MLEMU_TENSORFLOW_THREADS; predictors/tensorflow.py).
    tensorflow_threads: int = 1


class Predictor(abc.ABC):
    """Load once with from_path, then predict many times, possibly from several threads."""

    #: The ml v1 Version.framework this class serves ("" for custom code).
    framework: ClassVar[str] = ""
    #: Request keys besides `instances` passed through as predict kwargs; None accepts any.
    accepted_parameters: ClassVar[frozenset[str] | None] = frozenset()
    #: True if predict(a + b) == predict(a) + predict(b) for any lists of instances a and b, so
    #: concurrent requests may be merged into one call (predictors/batching.py).
    batchable: bool = False
    #: True if predict also takes a numeric numpy array (rows along its first axis) in place of
    #: the same rows as lists, and answers as for `array.tolist()`. Large all-number AI Platform
    #: bodies (wirearray.py) and single V2/grps tensors (protocols/inference.instances_for) then
    #: skip Python lists altogether; custom code always gets lists.
    takes_arrays: ClassVar[bool] = False

    def takes_array(self, parameters: Mapping[str, Any]) -> bool:
        """Whether predict takes the numeric array (as `takes_arrays` says) for a request with
        these parameters: a predictor whose input types depend on them (TensorFlow's signatures)
        decides per request; the others answer `takes_arrays`."""
        return self.takes_arrays

    @classmethod
    @abc.abstractmethod
    def from_path(cls, model_dir: str) -> Predictor:
        """Load the model stored in the local directory `model_dir`."""

    @abc.abstractmethod
    def predict(self, instances: list[Any], **kwargs: Any) -> Any:
        """Predictions for `instances`, in order, as JSON-ready Python values."""

    @classmethod
    def load_configured(cls, model_dir: str, options: PredictorOptions) -> Predictor:
        """`from_path`, then `configure`: how predictors.load loads a built-in framework's model.
        A class whose options shape the loading itself (TensorFlow's session) overrides it."""
        predictor = cls.from_path(model_dir)
        predictor.configure(options)
        return predictor

    def configure(self, options: PredictorOptions) -> None:
        """Apply the loading emulator's options (predictors.load calls this after loading)."""

    def signature(self) -> Signature:
        """Inputs and outputs for metadata endpoints; empty when the model cannot tell."""
        return Signature()

    def close(self) -> None:
        """Release resources when the version is undeployed."""
