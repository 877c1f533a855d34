"""Integrated gradients and sampled Shapley on TensorFlow SavedModels, in process (the predictor
as `deployments` loads it): a TF2 export with two named inputs, a Keras `model.export`, a
non-linear model whose approximation error shrinks with more steps, and string inputs (sampled
Shapley explains them; gradients cannot)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import explainers
from core.errors import InvalidArgument
from predictors.tensorflow import TensorFlowPredictor
from tests.kit import tfmodels

pytestmark = pytest.mark.slow
IG = {"integratedGradientsAttribution": {"numIntegralSteps": 8}}


def with_metadata(directory: Path, inputs: dict[str, Any], output: str) -> str:
    (directory / "explanation_metadata.json").write_text(json.dumps(
        {"inputs": inputs, "outputs": {"out": {"output_tensor_name": output}},
         "framework": "tensorflow2"}))
    return str(directory)


def entry(result: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(result[0]["attributions_by_label"][0])


@pytest.fixture(scope="module")
def tf2(tmp_path_factory: pytest.TempPathFactory) -> TensorFlowPredictor:
    return TensorFlowPredictor.from_path(str(tfmodels.tf2_model(tmp_path_factory.mktemp("tf2"))))


def test_two_named_inputs(tf2: TensorFlowPredictor, tmp_path: Path) -> None:
    model_dir = with_metadata(tmp_path, {"a": {"input_tensor_name": "a"},
                                         "b": {"input_tensor_name": "b", "input_baselines": [1.0]}},
                              "total")
    got = entry(explainers.explain(tf2, IG, model_dir, [{"a": [2.0, -3.0], "b": 5.0}], {}))
    # total = a0 + a1 + b: linear, so exact
    assert got["attributions"] == {"a": pytest.approx([2.0, -3.0]), "b": pytest.approx(4.0)}
    assert (got["example_score"], got["baseline_score"]) == (4.0, 1.0)
    assert got["label_index"] == -1  # a scalar per instance


def test_product_output_explains_the_larger_entry(tf2: TensorFlowPredictor, tmp_path: Path) -> None:
    model_dir = with_metadata(tmp_path, {"a": {"input_tensor_name": "a"},
                                         "b": {"input_tensor_name": "b"}}, "scaled")
    got = entry(explainers.explain(tf2, IG, model_dir, [{"a": [1.0, 3.0], "b": 2.0}], {}))
    # scaled = a * b; label 1 (6 > 2); along t*(a, b) the score is t^2 * a1 * b: half each
    assert got["label_index"] == 1
    assert got["attributions"] == {"a": pytest.approx([0.0, 3.0]), "b": pytest.approx(3.0)}
    assert got["approx_error"] == pytest.approx(0, abs=1e-6)


def test_keras_export(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    directory, model = tfmodels.keras_model(tmp_path_factory.mktemp("keras"))
    predictor = TensorFlowPredictor.from_path(str(directory))
    sig = predictor.select()
    (alias,), (output,) = list(sig.inputs), list(sig.outputs)
    model_dir = with_metadata(directory, {"features": {
        "input_tensor_name": sig.inputs[alias].tensor, "input_baselines": [[1.0, 1.0, 1.0]]}},
        sig.outputs[output].tensor)
    row = [0.5, -2.0, 3.0]
    got = entry(explainers.explain(predictor, IG, model_dir, [row], {}))
    weights = model.layers[0].get_weights()[0]
    logits = np.array(row) @ weights + [0.5, -0.5]
    assert got["label_index"] == int(np.argmax(logits))
    expected = weights[:, got["label_index"]] * (np.array(row) - 1.0)
    assert got["attributions"]["features"] == pytest.approx(expected.tolist(), rel=1e-5)


def test_more_steps_smaller_error_and_completeness_within_it(tmp_path: Path) -> None:
    import tensorflow as tf

    class Curved(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
        def serve(self, x: Any) -> dict[str, Any]:
            return {"y": tf.tanh(2.0 * x[:, 0]) * tf.exp(x[:, 1])}

    module = Curved()
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.serve})
    predictor = TensorFlowPredictor.from_path(str(tmp_path))
    model_dir = with_metadata(tmp_path, {"x": {"input_tensor_name": "x"}}, "y")
    errors = []
    for steps in (2, 10, 100):
        got = entry(explainers.explain(predictor, {"integratedGradientsAttribution": {
            "numIntegralSteps": steps}}, model_dir, [[1.2, 0.7]], {}))
        delta = got["example_score"] - got["baseline_score"]
        gap = abs(sum(got["attributions"]["x"]) - delta)
        assert gap <= got["approx_error"] * abs(delta) * (1 + 1e-6) + 1e-7
        errors.append(got["approx_error"])
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-3


def test_string_inputs(tf2: TensorFlowPredictor, tmp_path: Path) -> None:
    model_dir = with_metadata(tmp_path, {"text": {"input_tensor_name": "text_bytes",
                                                  "input_baselines": [""]}}, "length")
    params = {"signature_name": "text"}
    got = entry(explainers.explain(tf2, {"sampledShapleyAttribution": {"numPaths": 2}}, model_dir,
                                   ["hello"], params))
    assert got["attributions"] == {"text": pytest.approx(5.0)}  # length("hello") - length("")
    with pytest.raises(InvalidArgument, match="Integrated gradients needs numeric inputs"):
        explainers.explain(tf2, IG, model_dir, ["hello"], params)
