"""Gradients of a TensorFlow SavedModel's signature output with respect to its inputs, for
AI Explanations' integrated gradients (explainers/gradients.py).

The serving graph is finalized (predictors/tensorflow.py), so gradient ops go into a second copy
of the SavedModel, loaded into its own graph the first time a version is explained and kept for
the predictor's lifetime, one per (signature, output, inputs). The score differentiated is
sum(output * mask): the mask selects each row's explained label (one-hot over the last axis) or
the whole output for a scalar per row, so one `session.run` gives every row's gradient (rows of a
batch are independent). Works alike for TF1 graph exports and TF2 exports (whose signatures are
function calls TensorFlow differentiates through). TensorFlow itself comes from the predictor.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np

from core.errors import PredictionFailed


@dataclasses.dataclass(frozen=True)
class _Graph:
    session: Any
    feeds: dict[str, Any]  # alias -> input tensor
    mask: Any
    output: Any
    grads: dict[str, Any]  # alias -> gradient tensor


class GradientGraphs:
    def __init__(self, tf: Any, model_dir: str, tag: str, config: Any) -> None:
        self._tf, self._model_dir, self._tag = tf, model_dir, tag
        self._config = config  # the serving session's ConfigProto (its thread policy)
        self._graphs: dict[tuple[str, str, tuple[str, ...]], _Graph] = {}
        self._lock = threading.Lock()

    def _build(self, signature: str, output: str, inputs: tuple[str, ...]) -> _Graph:
        tf = self._tf
        graph = tf.Graph()
        session = tf.compat.v1.Session(graph=graph, config=self._config)
        with graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(session, [self._tag], self._model_dir)
            sig = meta.signature_def[signature]
            feeds = {a: graph.get_tensor_by_name(sig.inputs[a].name) for a in sig.inputs}
            out = graph.get_tensor_by_name(sig.outputs[output].name)
            if not out.dtype.is_floating or any(not feeds[a].dtype.is_floating for a in inputs):
                session.close()
                raise PredictionFailed(
                    "Integrated gradients needs float inputs and outputs; explain this model with "
                    "sampledShapleyAttribution (or its float inputs only).")
            mask = tf.compat.v1.placeholder(out.dtype, name="mlemu_explained_label_mask")
            grads = tf.gradients(tf.reduce_sum(out * mask), [feeds[a] for a in inputs])
        missing = [a for a, g in zip(inputs, grads, strict=True) if g is None]
        if missing:
            session.close()
            raise PredictionFailed(f"The output {output!r} is not differentiable with respect to "
                                   f"{', '.join(missing)}; use sampledShapleyAttribution.")
        graph.finalize()
        return _Graph(session, feeds, mask, out, dict(zip(inputs, grads, strict=True)))

    def get(self, signature: str, output: str, inputs: tuple[str, ...]) -> _Graph:
        key = (signature, output, inputs)
        with self._lock:
            if key not in self._graphs:
                self._graphs[key] = self._build(*key)
            return self._graphs[key]

    def run(self, graph: _Graph, columns: dict[str, np.ndarray], label: int,
            errors: tuple[type[Exception], ...]) -> dict[str, np.ndarray]:
        feeds = {graph.feeds[a]: v for a, v in columns.items()}
        try:
            out = graph.session.run(graph.output, feeds)
            mask = np.ones_like(out)
            if label >= 0 and out.ndim >= 2:
                mask = np.zeros_like(out)
                mask[..., label] = 1
            feeds[graph.mask] = mask
            values = graph.session.run(graph.grads, feeds)
        except errors as exc:
            raise PredictionFailed(str(getattr(exc, "message", exc)).split("\n")[0]) from None
        return {alias: np.asarray(value) for alias, value in values.items()}

    def close(self) -> None:
        with self._lock:
            for graph in self._graphs.values():
                graph.session.close()
            self._graphs.clear()
