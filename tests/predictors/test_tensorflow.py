"""TensorFlowPredictor on SavedModels built here both ways (TF2 save / Keras export, TF1 builder)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import predictors
from core.errors import ModelLoadError, PredictionFailed
from predictors import json_values
from predictors.base import TensorSpec
from predictors.tensorflow import TensorFlowPredictor

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.kit import tfmodels

    base = tmp_path_factory.mktemp("tf")
    keras_dir, keras_model = tfmodels.keras_model(base / "keras")
    return {
        "tf2": tfmodels.tf2_model(base / "tf2"),
        "tf1": tfmodels.tf1_model(base / "tf1"),
        "one": tfmodels.tf2_one_signature(base / "one"),
        "train_only": tfmodels.tf1_without_serve_tag(base / "train_only"),
        "keras": keras_dir,
        "keras_model": keras_model,
    }


@pytest.fixture(scope="module")
def tf2(models: dict[str, Any]) -> TensorFlowPredictor:
    predictor, framework = predictors.load(str(models["tf2"]))  # detected from saved_model.pb
    assert framework == "TENSORFLOW"
    assert isinstance(predictor, TensorFlowPredictor)
    return predictor


@pytest.fixture(scope="module")
def tf1(models: dict[str, Any]) -> TensorFlowPredictor:
    return TensorFlowPredictor.from_path(str(models["tf1"]))


def test_named_inputs_give_one_object_per_instance(tf2: TensorFlowPredictor) -> None:
    result = tf2.predict([{"a": [1.0, 2.0], "b": 3.0}, {"a": [0.5, 0.25], "b": -2}])
    assert result == [{"scaled": [3.0, 6.0], "total": 6.0}, {"scaled": [-1.0, -0.5], "total": -1.25}]


def test_single_input_takes_bare_values_and_gives_a_list(tf2: TensorFlowPredictor) -> None:
    assert tf2.predict([1.0, 2.0, 5.0], signature_name="half") == [3.5, 4.0, 5.5]
    assert tf2.predict([{"x": 1.0}], signature_name="half") == [3.5]  # or keyed by input name


def test_nan_and_infinity_pass_through(tf2: TensorFlowPredictor) -> None:
    out = tf2.predict([float("nan"), float("inf"), float("-inf")], signature_name="half")
    assert np.isnan(out[0]) and out[1:] == [float("inf"), float("-inf")]


def test_float32_outputs_are_written_in_shortest_round_trip_form(tf2: TensorFlowPredictor) -> None:
    # 0.5 * 0.2 + 3 in float32 is 3.0999999046325684 as a double; the float32 reads "3.1".
    assert tf2.predict([0.2], signature_name="half") == [3.1]
    assert json_values.json_value(np.array([0.1, 1 / 3], np.float32), "y") == [0.1, 0.33333334]


def test_b64_inputs_decode_and_bytes_outputs_encode(tf2: TensorFlowPredictor) -> None:
    result = tf2.predict([{"b64": "aGk="}, "abc"], signature_name="text")
    assert result == [{"echo_bytes": {"b64": "aGk="}, "length": 2, "upper": "HI"},
                      {"echo_bytes": {"b64": "YWJj"}, "length": 3, "upper": "ABC"}]


def test_string_outputs_that_are_not_text_go_out_as_b64() -> None:
    values = np.array([b"ok", b"\xff\xfe"], dtype=object)
    assert json_values.json_value(values, "label") == ["ok", {"b64": "//4="}]
    assert json_values.json_value(values, "label_bytes") == [{"b64": "b2s="}, {"b64": "//4="}]


def test_tf1_builder_export_restores_its_variables(tf1: TensorFlowPredictor) -> None:
    assert tf1.predict([1.0, 2.5]) == [2.0, 5.0]  # serving_default: y = w * x with w = 2.0


def test_keras_export_matches_keras(models: dict[str, Any]) -> None:
    predictor = TensorFlowPredictor.from_path(str(models["keras"]))
    rows = [[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]]
    expected = models["keras_model"].predict(np.array(rows, np.float32), verbose=0)
    np.testing.assert_allclose(predictor.predict(rows), expected, rtol=1e-6)


def test_classify_and_regress_over_tf_example(tf1: TensorFlowPredictor) -> None:
    one = {"x": ("float", [1.0])}
    [[neg, pos]] = tf1.classify([one], None, "classify_x")
    assert neg[0] == "neg" and pos[0] == "pos"
    assert pos[1] == pytest.approx(1 / (1 + np.exp(-4.0)), rel=1e-6)  # softmax([-2, 2])
    # context features are merged into every example (bias 1.0: z = 2 * x + 1)
    assert tf1.regress([one, {"x": ("float", [2.0])}], {"bias": ("float", [1.0])},
                       "tensorflow/serving/regress") == [3.0, 5.0]


def test_classify_needs_a_classify_signature(tf1: TensorFlowPredictor) -> None:
    with pytest.raises(PredictionFailed) as exc:
        tf1.classify([{"x": ("float", [1.0])}])
    assert exc.value.detail == ("Expected classification signature method_name to be "
                                "tensorflow/serving/classify. Was: tensorflow/serving/predict")
    with pytest.raises(PredictionFailed, match="Expected regression signature"):
        tf1.regress([{"x": ("float", [1.0])}], None, "classify_x")


def test_signature_choice(models: dict[str, Any], tf2: TensorFlowPredictor, tf1: TensorFlowPredictor) -> None:
    assert tf2.select().name == "serving_default"
    assert tf2.select("half").name == "half"
    only = TensorFlowPredictor.from_path(str(models["one"]))
    assert only.select().name == "only"  # the only signature (the TF2 init op does not count)
    assert only.predict([1.0]) == [3.5]
    with pytest.raises(PredictionFailed) as exc:
        tf1.predict([1.0], signature_name="nope")
    assert exc.value.detail == ('Serving signature name: "nope" not found in signature def. The model\'s '
                                "signatures are: classify_x, serving_default, tensorflow/serving/regress.")
    with pytest.raises(PredictionFailed, match="must be a string"):
        tf1.predict([1.0], signature_name=3)


def test_signature_and_signature_defs(tf2: TensorFlowPredictor, tf1: TensorFlowPredictor) -> None:
    sig = tf2.signature()
    assert sig.inputs == (TensorSpec("a", "FP32", (-1, 2)), TensorSpec("b", "FP32", (-1,)))
    assert sig.outputs == (TensorSpec("scaled", "FP32", (-1, 2)), TensorSpec("total", "FP32", (-1,)))
    classify = tf1.signature_defs()["classify_x"]  # the SignatureDef protos
    assert classify.method_name == "tensorflow/serving/classify"
    assert [d.size for d in classify.outputs["scores"].tensor_shape.dim] == [-1, 2]
    assert "__saved_model_init_op" in tf2.signature_defs()  # listed, as TF Serving lists it


def test_predict_tensors_runs_columns_and_filters_outputs(tf2: TensorFlowPredictor) -> None:
    out = tf2.predict_tensors({"a": np.array([[1, 2]], np.float32), "b": np.array([2.0])},
                              output_names=["total"])
    assert list(out) == ["total"] and out["total"].dtype == np.float32
    assert out["total"].tolist() == [5.0]
    with pytest.raises(PredictionFailed, match=r"Sent extra: \{c\}. Missing but required: \{b\}"):
        tf2.predict_tensors({"a": np.zeros((1, 2)), "c": np.zeros(1)})
    with pytest.raises(PredictionFailed, match="output tensor alias not found in signature: nope"):
        tf2.predict_tensors({"a": np.zeros((1, 2)), "b": np.zeros(1)}, output_names=["nope"])
    # a is declared [?, 2]: the C++ session TF Serving runs does not compare fed shapes with it
    out = tf2.predict_tensors({"a": np.ones((1, 3), np.float32), "b": np.ones(1, np.float32)})
    assert out["total"].tolist() == [4.0]


@pytest.mark.parametrize(("instances", "kwargs", "message"), [
    ([[1.0, 2.0]], {}, "instances is a plain list, but expecting list of objects"),
    ([{"a": [1.0, 2.0]}], {}, "keys must be equal to: a,b"),
    ([{"a": [1.0, 2.0], "b": 1.0}, {"a": [1.0], "b": 1.0}], {}, "Expecting tensor size: 2 but got: 1"),
    ([{"a": [[1.0], [2.0, 3.0]], "b": 1.0}], {}, "Encountered list at unexpected size: 2"),
    ([1.0, 2.0], {"signature_name": "uneven"},
     "Tensor name: first has inconsistent batch size: 1 expecting: 2"),
    (["x"], {"signature_name": "half"}, 'JSON Value: "x" Type: String is not of expected type: float'),
    ([{"b64": "%%%"}], {"signature_name": "text"}, "Unable to base64 decode"),
    ([5], {"signature_name": "text"}, "is not of expected type: string"),
])
def test_bad_instances_fail_clearly(tf2: TensorFlowPredictor, instances: list[Any],
                                    kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PredictionFailed) as exc:
        tf2.predict(instances, **kwargs)
    assert message in exc.value.message and exc.value.message.startswith("Prediction failed: ")


def test_load_errors_say_what_is_wrong(models: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="serve"):
        TensorFlowPredictor.from_path(str(models["train_only"]))
    (tmp_path / "saved_model.pb").write_bytes(b"not a protobuf")
    with pytest.raises(ModelLoadError, match="Could not load the model"):
        TensorFlowPredictor.from_path(str(tmp_path))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="Could not find a model file"):
        TensorFlowPredictor.from_path(str(tmp_path / "empty"))


def test_one_model_serves_many_threads(tf2: TensorFlowPredictor) -> None:
    results: list[Any] = [None] * 8
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(20):
                results[i] = tf2.predict([{"a": [i, 1.0], "b": 2.0}])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert results == [[{"scaled": [2.0 * i, 2.0], "total": i + 3.0}] for i in range(8)]


def test_import_predictors_does_not_import_tensorflow() -> None:
    code = ("import sys, predictors, predictors.tensorflow, predictors.json_tensor; "
            "assert 'tensorflow' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


_THREAD_POLICY = """
import gc, json, os, sys
import predictors
from predictors.base import PredictorOptions

options = PredictorOptions(tensorflow_threads=int(sys.argv[2]))
predictor, _ = predictors.load(sys.argv[1], options=options)
for _ in range(20):
    assert predictor.predict([[1.0], [2.0]]) == [[2.0], [4.0]]
print(json.dumps({"threads": len(os.listdir("/proc/self/task")), "policy": predictor.threads,
                  "frozen": gc.get_freeze_count(), "collected": len(gc.get_objects())}))
"""


def test_sessions_run_in_the_callers_thread_and_the_import_is_frozen(models: dict[str, Any]) -> None:
    # Each in a fresh process: TensorFlow sizes its pools once per process, at the first session.
    def run(threads: int) -> dict[str, int]:
        done = subprocess.run([sys.executable, "-c", _THREAD_POLICY, str(models["tf1"]), str(threads)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
        return json.loads(done.stdout.splitlines()[-1])

    ours, tensorflows = run(1), run(0)
    assert (ours["policy"], tensorflows["policy"]) == (1, 0)
    # The default starts no inter-op pool and a one-thread intra-op pool: fewer threads than
    # TensorFlow's own default of a pool per core for each.
    assert ours["threads"] < tensorflows["threads"]
    # TensorFlow's import (~320,000 objects) left the collector's generations; what is left for
    # it to walk is this process's own objects.
    for process in (ours, tensorflows):
        assert process["frozen"] > 200_000
        assert process["collected"] < 50_000


def test_numbers_convert_as_tf_serving_converts_them(tf2: TensorFlowPredictor,
                                                     tf1: TensorFlowPredictor) -> None:
    # 0.5x + 3 in float32: an int rounds to the nearest float, a double beyond range is inf
    out = tf2.predict([1435774380, 1e39], signature_name="half")
    assert np.array(out, np.float32).tolist() == [717887168.0, float("inf")]
    # x is declared [?]; rows of [1] make a [2, 1] feed, which the session runs all the same
    assert tf1.predict([[1.0], [2.0]]) == [[2.0], [4.0]]
