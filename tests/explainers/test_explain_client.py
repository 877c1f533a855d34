"""`projects.explain` end to end: a live `app.py serve`, versions created with an explanationConfig
through Google's own ml v1 client (googleapiclient), `ml.projects().explain(...)` answered with
attributions checked against known values: integrated gradients on linear TensorFlow models (a
TF1 graph export and a TF2 export) is exactly w * (x - baseline); sampled Shapley on XGBoost,
scikit-learn and a custom predictor matches exact Shapley values within the reported error.
Also the errors: a bad config, a method the framework cannot run, a missing metadata file, XRAI
on a model without an image input,
a version without a config; and `python app.py explain`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from googleapiclient.errors import HttpError

from tests.conftest import LiveServer, start_server, stop_server
from tests.kit import modelkit
from tests.kit.mlclient import create_version, error_of, ml_client, wait_done
from tests.kit.shapley import BASELINE, X, exact_shapley, sklearn_interactions

pytestmark = pytest.mark.slow
P = "projects/demo"
W = np.array([1.5, -2.0, 0.5], np.float32)
W2 = np.array([[1.0, -1.0], [2.0, 0.5], [-0.5, 3.0]], np.float32)
TF_BASELINE = [0.5, 0.0, -1.0]


def tf1_linear(directory: Path) -> None:
    """TF1 builder export, static shapes as Estimator-era models had: x [?, 3] -> y [?, 1]."""
    import tensorflow as tf

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        w = v1.get_variable("w", initializer=W.reshape(3, 1))
        y = tf.identity(tf.matmul(x, w) + 0.25, name="y")
        builder = v1.saved_model.Builder(str(directory))
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": v1.saved_model.predict_signature_def({"x": x}, {"y": y})})
        builder.save()
    write_metadata(directory, {"features": {"input_tensor_name": "x:0",
                                            "input_baselines": [TF_BASELINE]}},
                   {"score": {"output_tensor_name": "y:0"}}, "tensorflow")


def tf2_classifier(directory: Path) -> None:
    """TF2 export: x [?, 3] -> logits = x @ W2 (2 classes) and their softmax."""
    import tensorflow as tf

    class Linear(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable(W2)

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def serve(self, x: Any) -> dict[str, Any]:
            logits = tf.matmul(x, self.w)
            return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

    module = Linear()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
    write_metadata(directory, {"x": {"input_tensor_name": "x", "input_baselines": [0.0]}},
                   {"logits": {"output_tensor_name": "logits",
                               "index_name_mapping": ["no", "yes"]}}, "tensorflow2")


def write_metadata(directory: Path, inputs: dict[str, Any], outputs: dict[str, Any],
                   framework: str) -> None:
    (directory / "explanation_metadata.json").write_text(json.dumps(
        {"inputs": inputs, "outputs": outputs, "framework": framework}))


ROW_METADATA = ({"data": {"input_baselines": [BASELINE], "encoding": "bag_of_features",
                          "index_feature_mapping": ["a", "b", "c"]}},
                {"value": {}})


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import joblib

    root = tmp_path_factory.mktemp("explain-models")
    tf1_linear(root / "tf1")
    tf2_classifier(root / "tf2")
    (root / "sk").mkdir()
    estimator = sklearn_interactions(root)
    joblib.dump(estimator, root / "sk" / "model.joblib")
    write_metadata(root / "sk", *ROW_METADATA, "scikit_learn")
    import xgboost as xgb

    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 3))
    booster = xgb.train({"objective": "reg:squarederror", "max_depth": 3, "nthread": 1},
                        xgb.DMatrix(x, label=x[:, 0] * x[:, 2] - x[:, 1]), num_boost_round=15)
    (root / "xgb").mkdir()
    booster.save_model(root / "xgb" / "model.ubj")  # UBJSON, XGBoost's default format
    (root / "xgb" / "model.ubj").rename(root / "xgb" / "model.bst")
    write_metadata(root / "xgb", *ROW_METADATA, "xgboost")
    package = modelkit.custom_package(root / "pkg")
    modelkit.custom_model_dir(root / "custom", factor=3.0)
    write_metadata(root / "custom", *ROW_METADATA, "custom_container")
    (root / "bare").mkdir()
    joblib.dump(estimator, root / "bare" / "model.joblib")  # no explanation_metadata.json
    return {"root": root, "sk": estimator, "xgb": booster, "package": package}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # scikit-learn, XGBoost and custom code are explained as an mlemu extension (issue 34)
    live = start_server(tmp_path_factory.mktemp("state"),
                        env={"MLEMU_EXPLAIN_ANY_FRAMEWORK": "true"})
    yield live
    stop_server(live.proc)


@pytest.fixture(scope="module")
def ml(server: LiveServer, models: dict[str, Any]) -> Any:
    ml = ml_client(server.url)
    root = models["root"]
    ig = {"integratedGradientsAttribution": {"numIntegralSteps": 10}}
    shapley = {"sampledShapleyAttribution": {"numPaths": 25}}
    specs = {
        "tf1": ("tf1", {"explanationConfig": ig}),
        "tf2": ("tf2", {"explanationConfig": ig, "framework": "TENSORFLOW"}),
        "tfshap": ("tf1", {"explanationConfig": shapley}),
        "sk": ("sk", {"explanationConfig": shapley}),
        "xgb": ("xgb", {"explanationConfig": shapley, "framework": "XGBOOST"}),
        "custom": ("custom", {"explanationConfig": shapley, "predictionClass":
                              "scale_predictor.ScalePredictor",
                              "packageUris": [str(models["package"])]}),
        "xrai": ("tf2", {"explanationConfig": {"xraiAttribution": {"numIntegralSteps": 5}}}),
        "plain": ("sk", {}),
    }
    ops = {}
    for model, (directory, extra) in specs.items():
        ml.projects().models().create(parent=P, body={"name": model}).execute()
        ops[model] = create_version(ml, f"{P}/models/{model}", "v1", root / directory, **extra)
    for model, op in ops.items():
        assert "error" not in wait_done(ml, op), (model, op)
    return ml


def mapped(entry: dict[str, Any]) -> np.ndarray:
    """ROW_METADATA's index_feature_mapping: one attribution list per feature name, read as
    Google's tabular sample reads them (`attributions[feature_name][0]`)."""
    assert sorted(entry["attributions"]) == ["a", "b", "c"]
    return np.array([entry["attributions"][name][0] for name in ("a", "b", "c")])


def explain(ml: Any, name: str, instances: list[Any]) -> list[dict[str, Any]]:
    response = ml.projects().explain(name=name, body={"instances": instances}).execute()
    return [e["attributions_by_label"][0] for e in response["explanations"]]


def test_tf1_integrated_gradients_are_exact_for_a_linear_model(ml: Any) -> None:
    rows = [[1.0, 2.0, 3.0], [-0.5, 0.25, 4.0]]
    entries = explain(ml, f"{P}/models/tf1/versions/v1", rows)
    for row, entry in zip(rows, entries, strict=True):
        expected = W * (np.array(row) - TF_BASELINE)
        assert entry["attributions"]["features"] == [pytest.approx(float(v), rel=1e-5)
                                                     for v in expected]
        assert entry["example_score"] == pytest.approx(float(W @ row) + 0.25, rel=1e-5)
        assert entry["baseline_score"] == pytest.approx(float(W @ TF_BASELINE) + 0.25, rel=1e-5)
        assert entry["output_name"] == "score" and entry["label_index"] == 0
        assert entry["approx_error"] < 1e-5
        total = sum(entry["attributions"]["features"])
        assert total == pytest.approx(entry["example_score"] - entry["baseline_score"], rel=1e-5)


def test_tensorflow_sampled_shapley(ml: Any) -> None:
    row = [1.0, 2.0, 3.0]
    (entry,) = explain(ml, f"{P}/models/tfshap/versions/v1", [row])
    # a linear model: every feature order gives w * (x - baseline), so no sampling error
    assert entry["attributions"]["features"] == [
        pytest.approx(float(v), rel=1e-5) for v in W * (np.array(row) - TF_BASELINE)]
    assert entry["approx_error"] == pytest.approx(0, abs=1e-5)


def test_tf2_explains_the_predicted_class_on_the_model_path(ml: Any) -> None:
    rows = [[1.0, 0.0, 2.0], [3.0, 0.0, -1.0]]
    entries = explain(ml, f"{P}/models/tf2", rows)  # the default version
    for row, entry in zip(rows, entries, strict=True):
        logits = np.array(row) @ W2
        label = int(np.argmax(logits))
        assert entry["label_index"] == label
        assert entry["label_name"] == ["no", "yes"][label]
        assert entry["output_name"] == "logits"
        assert entry["attributions"]["x"] == [pytest.approx(float(v), rel=1e-5, abs=1e-6)
                                              for v in W2[:, label] * np.array(row)]
        assert entry["example_score"] == pytest.approx(float(logits[label]), rel=1e-5)
        assert entry["baseline_score"] == 0.0
    assert {e["label_index"] for e in entries} == {0, 1}


@pytest.mark.parametrize("model", ["sk", "xgb"])
def test_sampled_shapley_matches_exact_values_within_the_reported_error(
        ml: Any, models: dict[str, Any], model: str) -> None:
    import xgboost as xgb

    (entry,) = explain(ml, f"{P}/models/{model}/versions/v1", [X])
    if model == "sk":
        f = lambda row: float(models["sk"].predict(np.array([row]))[0])  # noqa: E731
    else:
        f = lambda row: float(models["xgb"].predict(xgb.DMatrix(np.array([row], np.float32)))[0])  # noqa: E731
    exact = exact_shapley(f, X, BASELINE)
    got = mapped(entry)
    delta = entry["example_score"] - entry["baseline_score"]
    assert entry["example_score"] == pytest.approx(f(X), rel=1e-6)
    assert got.sum() == pytest.approx(delta, abs=1e-5)  # completeness
    assert np.abs(got - exact).max() <= 3 * entry["approx_error"] * abs(delta) + 1e-5
    again = explain(ml, f"{P}/models/{model}/versions/v1", [X])
    assert again == [entry]  # the same request, the same attributions


def test_custom_predictor_sampled_shapley(ml: Any) -> None:
    (entry,) = explain(ml, f"{P}/models/custom/versions/v1", [X])
    # ScalePredictor: 3 * sum(row), linear: every path gives 3 * (x - baseline)
    assert mapped(entry).tolist() == pytest.approx((3 * (np.array(X) - BASELINE)).tolist())
    assert entry["approx_error"] == pytest.approx(0, abs=1e-9)


def test_explanation_config_is_stored_and_returned(ml: Any) -> None:
    version = ml.projects().models().versions().get(name=f"{P}/models/sk/versions/v1").execute()
    assert version["explanationConfig"] == {"sampledShapleyAttribution": {"numPaths": 25}}
    listed = ml.projects().models().versions().list(parent=f"{P}/models/xgb").execute()
    assert listed["versions"][0]["explanationConfig"] == {
        "sampledShapleyAttribution": {"numPaths": 25}}
    plain = ml.projects().models().versions().get(name=f"{P}/models/plain/versions/v1").execute()
    assert "explanationConfig" not in plain


@pytest.mark.parametrize("extra, words", [
    ({"explanationConfig": {"sampledShapleyAttribution": {"numPaths": 51}}}, "from 1 to 50"),
    ({"explanationConfig": {"integratedGradientsAttribution": {"numIntegralSteps": 0}}},
     "from 1 to 100"),
    ({"explanationConfig": {"sampledShapleyAttribution": {}, "xraiAttribution": {}}},
     "exactly one"),
    ({"explanationConfig": {"integratedGradientsAttribution": {}}, "framework": "SCIKIT_LEARN"},
     "needs a differentiable TensorFlow model"),
])
def test_bad_configs_are_refused_at_create(ml: Any, models: dict[str, Any], extra: dict[str, Any],
                                           words: str) -> None:
    with pytest.raises(HttpError) as info:
        create_version(ml, f"{P}/models/plain", "bad", models["root"] / "sk", **extra)
    error = error_of(info.value)
    assert info.value.resp.status == 400 and error["status"] == "INVALID_ARGUMENT"
    assert error["message"].startswith("Field: version.explanation_config Error: ")
    assert words in error["message"]


@pytest.mark.parametrize("directory, config, words", [
    ("sk", {"integratedGradientsAttribution": {}}, "needs a differentiable TensorFlow model"),
    ("bare", {"sampledShapleyAttribution": {}}, "explanation_metadata.json was not found"),
])
def test_what_the_loaded_model_cannot_explain_fails_the_version(
        ml: Any, models: dict[str, Any], directory: str, config: dict[str, Any], words: str) -> None:
    name = f"failing_{directory}"
    op = create_version(ml, f"{P}/models/plain", name, models["root"] / directory,
                        explanationConfig=config)
    done = wait_done(ml, op)
    assert words in done["error"]["message"]
    version = ml.projects().models().versions().get(name=f"{P}/models/plain/versions/{name}").execute()
    assert version["state"] == "FAILED" and words in version["errorMessage"]


def test_explain_errors(ml: Any) -> None:
    with pytest.raises(HttpError) as info:
        explain(ml, f"{P}/models/xrai/versions/v1", [[1.0, 2.0, 3.0]])
    assert info.value.resp.status == 400  # XRAI ranks image regions; this input is a vector
    assert "xraiAttribution explains one image input" in error_of(info.value)["message"]
    with pytest.raises(HttpError) as info:
        explain(ml, f"{P}/models/plain/versions/v1", [X])
    assert info.value.resp.status == 400
    assert error_of(info.value)["status"] == "FAILED_PRECONDITION"
    with pytest.raises(HttpError) as info:
        explain(ml, f"{P}/models/ghost", [X])
    assert info.value.resp.status == 404
    with pytest.raises(HttpError) as info:  # a row the model cannot take: the predict error shape
        explain(ml, f"{P}/models/tf1/versions/v1", [["a", "b", "c"]])
    assert info.value.resp.status == 400
    assert isinstance(json.loads(info.value.content)["error"], str)


def test_cli(server: LiveServer, ml: Any, models: dict[str, Any], tmp_path: Path) -> None:
    from app import main

    rows = tmp_path / "rows.json"
    rows.write_text("[1.0, 2.0, 3.0]\n")
    result = CliRunner().invoke(main, ["explain", "--model", "tf1", "--version", "v1",
                                       "--json-instances", str(rows), "--url", server.url,
                                       "--project", "demo"])
    assert result.exit_code == 0, result.output
    (explanation,) = json.loads(result.output)["explanations"]
    attributions = explanation["attributions_by_label"][0]["attributions"]["features"]
    assert attributions == pytest.approx((W * (np.array([1.0, 2.0, 3.0]) - TF_BASELINE)).tolist(),
                                         rel=1e-5)
    result = CliRunner().invoke(main, [
        "versions", "create", "cli", "--model", "plain", "--origin", str(models["root"] / "sk"),
        "--explanation-method", "sampled-shapley", "--num-paths", "7", "--url", server.url,
        "--project", "demo"])
    assert result.exit_code == 0, result.output
    version = ml.projects().models().versions().get(name=f"{P}/models/plain/versions/cli").execute()
    assert version["explanationConfig"] == {"sampledShapleyAttribution": {"numPaths": 7}}
    rows.write_text("")
    result = CliRunner().invoke(main, ["explain", "--model", "tf1", "--json-instances", str(rows),
                                       "--url", server.url, "--project", "demo"])
    assert result.exit_code == 1 and "No valid instance was found." in result.output
