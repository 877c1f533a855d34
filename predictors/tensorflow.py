"""TENSORFLOW: SavedModels (tag `serve`) run by SignatureDef in a graph session, as TF Serving does.

The model is loaded with the TF1 loader (tf.compat.v1.saved_model.loader) into its own tf.Graph
and Session, and a signature runs as one C++ Session run of its input and output tensors. That is
TF Serving's own way (SavedModelBundle + Session::Run, servables/tensorflow/predict_util.cc
RunPredict), and it serves every kind of SavedModel a user brings: TF2 exports
(tf.saved_model.save, Keras `model.export`) and TF1-era builder/Estimator exports, whose
classify/regress signatures take serialized tf.Example strings; `tf.saved_model.load` cannot load
some of the latter.

Runs go through session callables (CallableOptions of feed and fetch names), not `session.run`:
Python's `run` refuses a value whose shape differs from the tensor's static shape ("Cannot feed
value of shape (3,) for Tensor 'x:0', which has shape '(?, 1)'"), a check the C++ session TF
Serving calls does not make, so TF Serving's own quick start (half_plus_two, x: [?, 1], fed
[1.0, 2.0, 5.0]) works there and must work here. dtypes are still checked (by the session).
Callables are made once per feed/fetch set and are thread-safe, so one model serves many threads.

Signature choice (AI Platform `signature_name`, TF Serving `signature_name`): the requested one,
else `serving_default`, else the only one; a miss names the signatures the model has.

Thread policy (MLEMU_TENSORFLOW_THREADS, `session_config`): by default a session call runs every
op in the request's own thread, on one core (ConfigProto inter_op_parallelism_threads=-1,
intra_op_parallelism_threads=1; DirectSession then runs its executor in the caller's thread,
tensorflow/core/common_runtime/direct_session.cc `run_in_caller_thread_`). Parallelism comes from
the worker processes and batching, as for BLAS and XGBoost. TensorFlow's own default (a pool of
one thread per core for each of inter- and intra-op work, per process) hands every op of a
one-row call to a pool thread and back, and its spinning pool threads compete with the request
threads of the same and the other workers for the cores, which cost throughput and lengthened
the tail (bench/NOTES.md, "TensorFlow's tail").

TensorFlow is imported by `from_path` only, never by `import predictors`; its first import
freezes the objects it creates out of the collector's reach (predictors/preload.py,
`freeze_imported`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.errors import ModelLoadError, PredictionFailed
from observability import logs
from predictors import TENSORFLOW, find_model_file, json_batch, json_tensor, json_values, preload, register
from predictors.base import Predictor, PredictorOptions, Signature, TensorSpec
from predictors.tensorflow_examples import ExampleSignatures
from predictors.tf_errors import op_message
from predictors.tf_gradients import GradientGraphs

SERVE_TAG = "serve"
DEFAULT_SIGNATURE = "serving_default"
#: TF2 exports carry this pseudo-signature (the init op); it is listed but never run.
INIT_OP_SIGNATURE = "__saved_model_init_op"
PREDICT_METHOD = "tensorflow/serving/predict"

#: TensorFlow DataType names -> Open Inference Protocol datatypes (predictors.base.TensorSpec).
V2_DATATYPES = {
    "DT_FLOAT": "FP32", "DT_DOUBLE": "FP64", "DT_HALF": "FP16", "DT_BFLOAT16": "BF16",
    "DT_INT8": "INT8", "DT_INT16": "INT16", "DT_INT32": "INT32", "DT_INT64": "INT64",
    "DT_UINT8": "UINT8", "DT_UINT16": "UINT16", "DT_UINT32": "UINT32", "DT_UINT64": "UINT64",
    "DT_BOOL": "BOOL", "DT_STRING": "BYTES",
}


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One signature input or output: its alias, graph tensor, dtype and shape (-1 unknown)."""

    alias: str
    tensor: str
    dtype: np.dtype
    dtype_name: str  # e.g. DT_FLOAT
    shape: tuple[int, ...] | None  # None: unknown rank


@dataclasses.dataclass(frozen=True)
class SignatureInfo:
    name: str
    method_name: str
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]


def _tensor_info(tf: Any, alias: str, info: Any) -> TensorInfo:
    if not info.dtype:  # DT_INVALID: the init op's pseudo-output
        np_dtype = np.dtype(object)
    else:
        dtype = tf.as_dtype(info.dtype)
        np_dtype = np.dtype(object) if dtype == tf.string else np.dtype(dtype.as_numpy_dtype)
    shape = None if info.tensor_shape.unknown_rank else tuple(d.size for d in info.tensor_shape.dim)
    return TensorInfo(alias, info.name, np_dtype, _dtype_name(info.dtype), shape)


def _dtype_name(enum_value: int) -> str:
    from tensorflow.core.framework import types_pb2

    return str(types_pb2.DataType.Name(enum_value))


def _import_tensorflow() -> Any:
    import tensorflow as tf

    return tf


def session_config(tf: Any, threads: int) -> Any:
    """The ConfigProto of every session of a version (see the module docstring): `threads` 1 runs
    a call in the caller's thread, N > 1 gives it N intra-op and N inter-op threads, 0 leaves
    TensorFlow's defaults (one per core). TensorFlow sizes its intra-op pool once per process,
    from the first session, so one process serves every version with the first one's count."""
    config = tf.compat.v1.ConfigProto()
    if threads == 1:
        config.inter_op_parallelism_threads = -1
        config.intra_op_parallelism_threads = 1
    elif threads > 1:
        config.inter_op_parallelism_threads = threads
        config.intra_op_parallelism_threads = threads
    return config


@register
class TensorFlowPredictor(ExampleSignatures, Predictor):
    framework = TENSORFLOW
    accepted_parameters = frozenset({"signature_name"})
    batchable = True

    def __init__(self, tf: Any, session: Any, meta_graph: Any, model_dir: str,
                 threads: int = 1) -> None:
        self._tf = tf
        self._session = session
        #: MLEMU_TENSORFLOW_THREADS as this version's sessions were made with (`session_config`).
        self.threads = threads
        self._run_errors = (tf.errors.OpError, ValueError, TypeError)
        self._callables: dict[tuple[tuple[str, ...], tuple[str, ...]], Any] = {}
        self._callables_lock = threading.Lock()
        self.model_dir = model_dir
        self._gradient_graphs = GradientGraphs(tf, model_dir, SERVE_TAG,  # built when explained
                                               session_config(tf, threads))
        self._defs = dict(meta_graph.signature_def)
        self.signatures: dict[str, SignatureInfo] = {
            name: SignatureInfo(
                name, sig.method_name,
                {k: _tensor_info(tf, k, v) for k, v in sorted(sig.inputs.items())},
                {k: _tensor_info(tf, k, v) for k, v in sorted(sig.outputs.items())},
            )
            for name, sig in sorted(self._defs.items())
        }

    @classmethod
    def load_configured(cls, model_dir: str, options: PredictorOptions) -> TensorFlowPredictor:
        predictor = cls.from_path(model_dir, threads=options.tensorflow_threads)
        predictor.configure(options)
        return predictor

    @classmethod
    def from_path(cls, model_dir: str, threads: int = 1) -> TensorFlowPredictor:
        """The SavedModel in `model_dir`, its sessions run with `threads` (`session_config`)."""
        find_model_file(model_dir, TENSORFLOW)
        try:
            # Its import prints banners to stderr whatever TF_CPP_MIN_LOG_LEVEL says: they go
            # through logging instead (observability/logs.py).
            with logs.native_stderr("tensorflow"):
                tf = preload.freeze_imported("tensorflow", _import_tensorflow)
        except ImportError:  # e.g. the container image built with WITH_TENSORFLOW=false
            raise ModelLoadError(
                "TensorFlow is not installed in this mlemu (requirements-tf.txt; container images "
                "built with WITH_TENSORFLOW=false leave it out): TENSORFLOW models cannot be served."
            ) from None

        graph = tf.Graph()
        session = tf.compat.v1.Session(graph=graph, config=session_config(tf, threads))
        try:
            with graph.as_default():
                meta_graph = tf.compat.v1.saved_model.loader.load(session, [SERVE_TAG], model_dir)
        except Exception as exc:  # noqa: BLE001 - any loader failure is a bad SavedModel
            session.close()
            raise ModelLoadError(
                f"Could not load the model: {model_dir}. {type(exc).__name__}: {op_message(exc)}"
            ) from None
        graph.finalize()  # serving never adds ops; a finalized graph makes sure of it
        return cls(tf, session, meta_graph, model_dir, threads)

    # -- signatures -------------------------------------------------------------------------

    def runnable(self) -> list[str]:
        return [name for name in self.signatures if name != INIT_OP_SIGNATURE]

    def select(self, signature_name: Any = None) -> SignatureInfo:
        """The requested signature, else serving_default, else the only one."""
        if signature_name is not None and not isinstance(signature_name, str):
            raise PredictionFailed("'signature_name' key must be a string value.")
        available = ", ".join(self.runnable()) or "(none)"
        if signature_name:
            if signature_name in self.signatures and signature_name != INIT_OP_SIGNATURE:
                return self.signatures[signature_name]
            raise PredictionFailed(f'Serving signature name: "{signature_name}" not found in signature '
                                   f"def. The model's signatures are: {available}.")
        if DEFAULT_SIGNATURE in self.signatures:
            return self.signatures[DEFAULT_SIGNATURE]
        if len(self.runnable()) == 1:
            return self.signatures[self.runnable()[0]]
        raise PredictionFailed(f'Serving signature name: "{DEFAULT_SIGNATURE}" not found in signature '
                               f"def. Name one with signature_name; the model's signatures are: "
                               f"{available}.")

    def signature(self) -> Signature:
        try:
            sig = self.select()
        except PredictionFailed:
            return Signature()

        def specs(infos: Mapping[str, TensorInfo]) -> tuple[TensorSpec, ...]:
            return tuple(TensorSpec(i.alias, V2_DATATYPES.get(i.dtype_name, i.dtype_name),
                                    i.shape if i.shape is not None else (-1,))
                         for i in infos.values())

        return Signature(inputs=specs(sig.inputs), outputs=specs(sig.outputs))

    # -- running ----------------------------------------------------------------------------

    def _callable(self, feeds: tuple[str, ...], fetches: tuple[str, ...]) -> Any:
        key = (feeds, fetches)
        found = self._callables.get(key)
        if found is None:
            from tensorflow.core.protobuf import config_pb2

            with self._callables_lock:
                found = self._callables.get(key)
                if found is None:
                    options = config_pb2.CallableOptions(feed=list(feeds), fetch=list(fetches))
                    # Session's callable API (what Keras' TF1 backend ran on): the C++
                    # RunCallable, without Python's static-shape check (see the module docstring).
                    found = self._callables[key] = self._session._make_callable_from_options(options)
        return found

    def _run(self, fetches: dict[str, str], feeds: dict[str, Any]) -> dict[str, np.ndarray]:
        feed_names = tuple(feeds)
        aliases = list(fetches)
        try:
            run = self._callable(feed_names, tuple(fetches[a] for a in aliases))
            result = run(*(feeds[name] for name in feed_names))
        except self._run_errors as exc:
            raise PredictionFailed(op_message(exc)) from None
        return {alias: np.asarray(value) for alias, value in zip(aliases, result, strict=True)}

    def predict_tensors(self, inputs: Mapping[str, np.ndarray], signature_name: str | None = None,
                        output_names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Run one signature on named arrays; returns the outputs (all, or `output_names`)."""
        sig = self.select(signature_name)
        sent, wanted = set(inputs), set(sig.inputs)
        if sent != wanted:
            raise PredictionFailed(
                f"input size does not match signature: {len(sent)}!={len(wanted)} "
                f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(wanted))}}}). "
                f"Sent extra: {{{','.join(sorted(sent - wanted))}}}. "
                f"Missing but required: {{{','.join(sorted(wanted - sent))}}}.")
        names = list(output_names) if output_names else list(sig.outputs)
        for name in names:
            if name not in sig.outputs:
                raise PredictionFailed(f"output tensor alias not found in signature: {name} Outputs "
                                       f"expected to be in the set {{{','.join(sig.outputs)}}}.")
        feeds = {}
        for name, array in inputs.items():
            info = sig.inputs[name]
            array = np.asarray(array)
            if array.dtype != info.dtype:
                try:
                    array = array.astype(info.dtype)
                except (ValueError, TypeError) as exc:
                    raise PredictionFailed(f"input {name}: cannot convert {array.dtype} to "
                                           f"{json_tensor.type_name(info.dtype_name)}: {exc}") from None
            feeds[info.tensor] = array
        return self._run({name: sig.outputs[name].tensor for name in names}, feeds)

    def takes_array(self, parameters: Mapping[str, Any]) -> bool:
        """A large all-number body's array is taken for a signature with one float input (the
        common case): json_tensor.rows_to_columns then converts it in one go, exactly as the
        body's lists (predictors/json_batch.py). Other inputs get the lists, whose JSON types
        their checks and messages read (`1` and `1.0` differ for an integer input)."""
        try:
            sig = self.select(parameters.get("signature_name"))
        except PredictionFailed:
            return False  # the lists path gives the error
        return len(sig.inputs) == 1 and \
            next(iter(sig.inputs.values())).dtype_name in json_batch.FLOAT_TYPES

    def predict(self, instances: list[Any] | np.ndarray, **kwargs: Any) -> Any:
        """AI Platform's TensorFlow prediction: instances in, one prediction per instance out."""
        return json_values.columns_to_rows(self.predict_outputs(instances, **kwargs))

    def predict_outputs(self, instances: list[Any] | np.ndarray,
                        signature_name: str | None = None) -> dict[str, np.ndarray]:
        """The signature's output arrays for instances (batch prediction rowifies them itself)."""
        sig = self.select(signature_name)
        columns = json_tensor.rows_to_columns(
            instances, {name: info.dtype_name for name, info in sig.inputs.items()})
        return self.predict_tensors(columns, sig.name)

    def signature_defs(self) -> dict[str, Any]:
        """The SignatureDef protos by name (TF Serving's metadata prints them)."""
        return dict(sorted(self._defs.items()))

    def gradients(self, instances: list[Any], output: str, label: int, inputs: Sequence[str],
                  signature_name: str | None = None) -> dict[str, np.ndarray]:
        """d output[label] / d input, per instance, for each input alias (AI Explanations)."""
        sig = self.select(signature_name)
        columns = json_tensor.rows_to_columns(
            instances, {name: info.dtype_name for name, info in sig.inputs.items()})
        graph = self._gradient_graphs.get(sig.name, output, tuple(inputs))
        return self._gradient_graphs.run(graph, columns, label, self._run_errors)

    def close(self) -> None:
        self._gradient_graphs.close()
        self._session.close()
