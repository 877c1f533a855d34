"""`:classify` and `:regress` over serialized tf.Example, as TF Serving runs them.

tensorflow_serving/servables/tensorflow/classifier.cc and regressor.cc: the signature named (else
serving_default) must exist ("No signature was found with the name: ..."), have the classify or
regress method_name, one input keyed `inputs` and the outputs those files expect (`classes` and/or
`scores`; `outputs`); the examples are serialized (context first, then each example, as util.cc
InputToSerializedExampleTensor does) and fed to that input; the outputs are checked in those files'
order and words. A mixin of predictors/tensorflow.py's TensorFlowPredictor, which provides the
signatures, the SignatureDef protos and the session run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from core.errors import PredictionFailed
from predictors import json_values

if TYPE_CHECKING:
    from predictors.tensorflow import SignatureInfo

CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
_DEFAULT = "serving_default"
_INIT_OP = "__saved_model_init_op"

Features: TypeAlias = Mapping[str, tuple[str, list[Any]]]


class ExampleSignatures:
    """classify() and regress() for a predictor with signatures, SignatureDefs and `_run`."""

    _tf: Any
    _defs: dict[str, Any]
    signatures: dict[str, SignatureInfo]

    def _run(self, fetches: dict[str, str], feeds: dict[str, Any]) -> dict[str, np.ndarray]:
        raise NotImplementedError


    def _serialize(self, examples: Sequence[Features],
                   context: Features | None) -> np.ndarray:
        def encode(features: Features) -> bytes:
            example = self._tf.train.Example()
            for name, (kind, values) in features.items():
                getattr(example.features.feature[name], f"{kind}_list").value.extend(values)
            return bytes(example.SerializeToString())

        if not examples:
            raise PredictionFailed("Input is empty.")
        # TF Serving serializes context then example into one string; protobuf merges the two.
        prefix = encode(context) if context else b""
        return np.array([prefix + encode(e) for e in examples], dtype=object)

    def _example_signature(self, signature_name: str | None, method: str, kind: str) -> SignatureInfo:
        """servables/tensorflow/classifier.cc, regressor.cc: Get*SignatureDef, PreProcess*."""
        name = signature_name or _DEFAULT
        sig = self.signatures.get(name)
        if sig is None or name == _INIT_OP:
            raise PredictionFailed(f"No signature was found with the name: {name}")
        if sig.method_name != method:
            raise PredictionFailed(f"Expected {kind} signature method_name to be {method}. Was: "
                                   f"{sig.method_name}")
        if len(sig.inputs) != 1:
            raise PredictionFailed("Expected one input Tensor.")
        return sig

    def _debug_string(self, name: str) -> str:
        from google.protobuf import text_format

        return str(text_format.MessageToString(self._defs[name]))

    def classify(self, examples: Sequence[Features],
                 context: Features | None = None,
                 signature_name: str | None = None) -> list[list[tuple[str, float]]]:
        """[(label, score), ...] per example, from a classify signature's classes and/or scores."""
        sig = self._example_signature(signature_name, CLASSIFY_METHOD, "classification")
        if len(sig.outputs) not in (1, 2):
            raise PredictionFailed(f"Expected one or two output Tensors, found {len(sig.outputs)}")
        if "inputs" not in sig.inputs:
            raise PredictionFailed(f"No classification inputs found in SignatureDef: "
                                   f"{self._debug_string(sig.name)}")
        wanted = {k: v.tensor for k, v in sig.outputs.items() if k in ("classes", "scores")}
        if not wanted:
            raise PredictionFailed('Expected classification signature outputs to contain at least one '
                                   f'of "classes" or "scores". Signature was: '
                                   f"{self._debug_string(sig.name)}")
        serialized = self._serialize(examples, context)
        out = self._run(wanted, {sig.inputs["inputs"].tensor: serialized})
        n = len(serialized)
        classes, scores = out.get("classes"), out.get("scores")
        for name, tensor, dtype in (("classes", classes, "DT_STRING"), ("scores", scores, "DT_FLOAT")):
            if tensor is None:
                continue
            if tensor.ndim != 2:
                raise PredictionFailed("Expected Tensor shape: [batch_size num_classes] but got "
                                       f"[{','.join(map(str, tensor.shape))}]")
            if sig.outputs[name].dtype_name != dtype:
                raise PredictionFailed(f"Expected {name} Tensor of {dtype}. Got: "
                                       f"{sig.outputs[name].dtype_name}")
            if tensor.shape[0] != n:
                raise PredictionFailed(f"Expected {name} output batch size of {n}. Got: "
                                       f"{tensor.shape[0]}")
        width = (classes if classes is not None else scores).shape[1]  # type: ignore[union-attr]
        labels = json_values.json_value(classes, "classes") if classes is not None else None
        values = scores.tolist() if scores is not None else None
        return [[(labels[i][c] if labels else "", values[i][c] if values else 0.0)
                 for c in range(width)] for i in range(n)]

    def regress(self, examples: Sequence[Features],
                context: Features | None = None,
                signature_name: str | None = None) -> list[float]:
        """One value per example from a regress signature's `outputs`."""
        sig = self._example_signature(signature_name, REGRESS_METHOD, "regression")
        if len(sig.outputs) != 1:
            raise PredictionFailed("Expected one output Tensor.")
        if "inputs" not in sig.inputs:
            raise PredictionFailed(f"No regression inputs found in SignatureDef: "
                                   f"{self._debug_string(sig.name)}")
        if "outputs" not in sig.outputs:
            raise PredictionFailed(f"No regression outputs found in SignatureDef: "
                                   f"{self._debug_string(sig.name)}")
        serialized = self._serialize(examples, context)
        out = self._run({"outputs": sig.outputs["outputs"].tensor},
                        {sig.inputs["inputs"].tensor: serialized})["outputs"]
        n = len(serialized)
        if not (out.ndim == 1 or (out.ndim == 2 and out.shape[1] == 1)):
            raise PredictionFailed("Expected output Tensor shape to be either [batch_size] or "
                                   f"[batch_size, 1] but got [{','.join(map(str, out.shape))}]")
        if out.shape[0] != n:
            raise PredictionFailed(f"Input batch size did not match output batch size: {n} vs. "
                                   f"{out.shape[0]}")
        if sig.outputs["outputs"].dtype_name != "DT_FLOAT":
            raise PredictionFailed("Expected output Tensor of DT_FLOAT.  Got: "
                                   f"{sig.outputs['outputs'].dtype_name}")
        return out.reshape(-1).tolist()  # type: ignore[no-any-return]

