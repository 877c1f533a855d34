"""explainers/ in process: config and metadata rules, and the attributions themselves.

Sampled Shapley on scikit-learn and XGBoost models is compared with the exact baseline Shapley
values (every coalition enumerated) within the error the explanation reports, and for an additive
XGBoost model with XGBoost's own exact contributions (`pred_contribs`): for a sum of one-feature
trees, contrib(x) - contrib(baseline) is each feature's exact Shapley value against that baseline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import explainers
from core.errors import FailedPrecondition, InvalidArgument
from explainers import config, metadata
from predictors.base import Predictor
from predictors.sklearn import SklearnPredictor
from predictors.xgboost import XGBoostPredictor
from tests.kit.shapley import BASELINE, X, exact_shapley, sklearn_interactions

SHAPLEY = {"sampledShapleyAttribution": {"numPaths": 20}}


def write_metadata(directory: Path, inputs: dict[str, Any] | None = None, **extra: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = {"inputs": inputs or {"data": {"input_baselines": [BASELINE],
                                          "encoding": "identity"}},
            "outputs": {"score": {}}, "framework": "scikit_learn", **extra}
    (directory / metadata.FILE_NAME).write_text(json.dumps(body))
    return directory


def one(result: list[dict[str, Any]]) -> dict[str, Any]:
    (entry,) = result[0]["attributions_by_label"]
    return dict(entry)


# --- config -------------------------------------------------------------------------------

@pytest.mark.parametrize("body, words", [
    ({}, "exactly one"),
    ({"sampledShapleyAttribution": {"numPaths": 5}, "integratedGradientsAttribution": {}},
     "exactly one"),
    ({"sampledShapleyAttribution": {"numPaths": 0}}, "from 1 to 50"),
    ({"sampledShapleyAttribution": {"numPaths": 51}}, "from 1 to 50"),
    ({"integratedGradientsAttribution": {"numIntegralSteps": 101}}, "from 1 to 100"),
    ({"xraiAttribution": {"numIntegralSteps": "many"}}, "from 1 to 100"),
    ({"integratedGradientsAttribution": {"numPaths": 5}}, "takes only numIntegralSteps"),
    ({"shapley": {}}, 'Unknown name "shapley"'),
    ([], "JSON object"),
])
def test_bad_configs_are_refused(body: Any, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words):
        config.parse(body)


def test_config_defaults_and_string_counts() -> None:
    assert config.parse({"integratedGradientsAttribution": {}}) == config.Method(
        config.INTEGRATED_GRADIENTS, 50)
    assert config.parse({"sampledShapleyAttribution": {"numPaths": "7"}}).count == 7


@pytest.mark.parametrize("framework", ["SCIKIT_LEARN", "XGBOOST", ""])
def test_gradient_methods_need_tensorflow(framework: str) -> None:
    for method in ("integratedGradientsAttribution", "xraiAttribution"):
        with pytest.raises(InvalidArgument, match="needs a differentiable TensorFlow model"):
            config.check_framework(config.parse({method: {}}), framework)
    config.check_framework(config.parse(SHAPLEY), framework)


# --- metadata -----------------------------------------------------------------------------

@pytest.mark.parametrize("body, words", [
    ({"outputs": {"y": {}}}, '"inputs" must map'),
    ({"inputs": {"x": {}}, "outputs": {}}, "exactly one output"),
    ({"inputs": {"x": {}}, "outputs": {"a": {}, "b": {}}}, "exactly one output"),
    ({"inputs": {"x": {"encoding": "zip"}}, "outputs": {"y": {}}}, "encoding 'zip'"),
    ({"inputs": {"x": {"group_name": "g"}}, "outputs": {"y": {}}}, "not supported"),
    ({"inputs": {"x": {"input_baselines": 0}}, "outputs": {"y": {}}}, "list of baselines"),
])
def test_bad_metadata_is_refused(body: Any, words: str) -> None:
    with pytest.raises(FailedPrecondition, match=words):
        metadata.parse(body)


def test_missing_metadata_file(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="explanation_metadata.json was not found"):
        metadata.load(str(tmp_path))
    (tmp_path / metadata.FILE_NAME).write_text("{not json")
    with pytest.raises(FailedPrecondition, match="not readable JSON"):
        metadata.load(str(tmp_path))


def test_unreadable_metadata_file_names_no_server_path(tmp_path: Path) -> None:
    (tmp_path / metadata.FILE_NAME).mkdir()  # an OSError whose own text carries the full path
    with pytest.raises(FailedPrecondition, match="not readable") as caught:
        metadata.load(str(tmp_path))
    assert str(tmp_path) not in caught.value.message


# --- sampled Shapley ----------------------------------------------------------------------

def test_sklearn_sampled_shapley_matches_exact_within_reported_error(tmp_path: Path) -> None:
    model = sklearn_interactions(tmp_path)
    predictor = SklearnPredictor(model)
    model_dir = write_metadata(tmp_path / "m")
    entry = one(explainers.explain(predictor, SHAPLEY, str(model_dir), [X], {}))
    f = lambda row: float(model.predict(np.array([row]))[0])  # noqa: E731
    exact = exact_shapley(f, X, BASELINE)
    got = np.array(entry["attributions"]["data"])
    delta = entry["example_score"] - entry["baseline_score"]
    assert entry["example_score"] == pytest.approx(f(X))
    assert entry["baseline_score"] == pytest.approx(f(BASELINE))
    assert entry["label_index"] == -1 and entry["output_name"] == "score"
    # completeness: every sampled path telescopes to score - baseline score
    assert got.sum() == pytest.approx(delta, abs=1e-9)
    assert entry["approx_error"] > 0
    assert np.abs(got - exact).max() <= 3 * entry["approx_error"] * abs(delta)


def test_same_seed_same_attributions_other_seed_other_sample(tmp_path: Path) -> None:
    predictor = SklearnPredictor(sklearn_interactions(tmp_path))
    model_dir = str(write_metadata(tmp_path / "m"))
    few = {"sampledShapleyAttribution": {"numPaths": 3}}
    first = explainers.explain(predictor, few, model_dir, [X], {}, seed=11)
    assert explainers.explain(predictor, few, model_dir, [X], {}, seed=11) == first
    other = explainers.explain(predictor, few, model_dir, [X], {}, seed=12)
    assert one(other)["attributions"] != one(first)["attributions"]


def test_one_path_reports_no_error_estimate(tmp_path: Path) -> None:
    predictor = SklearnPredictor(sklearn_interactions(tmp_path))
    got = one(explainers.explain(predictor, {"sampledShapleyAttribution": {"numPaths": 1}},
                                 str(write_metadata(tmp_path / "m")), [X], {}))
    assert "approx_error" not in got
    assert sum(got["attributions"]["data"]) == pytest.approx(
        got["example_score"] - got["baseline_score"])


def xgboost_regressor(depth: int) -> Any:
    import xgboost as xgb

    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 3))
    y = x[:, 0] * x[:, 1] + 2 * x[:, 2] - x[:, 0]
    return xgb.train({"objective": "reg:squarederror", "max_depth": depth, "nthread": 1},
                     xgb.DMatrix(x, label=y), num_boost_round=20)


def test_xgboost_additive_model_matches_pred_contribs(tmp_path: Path) -> None:
    import xgboost as xgb

    booster = xgboost_regressor(depth=1)  # stumps: a sum of one-feature functions
    entry = one(explainers.explain(XGBoostPredictor(booster), SHAPLEY,
                                   str(write_metadata(tmp_path)), [X], {}))
    contribs = booster.predict(xgb.DMatrix(np.array([X, BASELINE])), pred_contribs=True)
    expected = contribs[0, :3] - contribs[1, :3]
    assert entry["attributions"]["data"] == pytest.approx(expected.tolist(), abs=1e-5)
    assert entry["approx_error"] == pytest.approx(0, abs=1e-5)  # no interactions: no variance


def test_xgboost_with_interactions_matches_exact_within_reported_error(tmp_path: Path) -> None:
    import xgboost as xgb

    booster = xgboost_regressor(depth=3)
    entry = one(explainers.explain(XGBoostPredictor(booster), SHAPLEY,
                                   str(write_metadata(tmp_path)), [X], {}))
    f = lambda row: float(booster.predict(xgb.DMatrix(np.array([row], np.float32)))[0])  # noqa: E731
    exact = exact_shapley(f, X, BASELINE)
    got = np.array(entry["attributions"]["data"])
    delta = entry["example_score"] - entry["baseline_score"]
    assert got.sum() == pytest.approx(delta, abs=1e-5)
    assert np.abs(got - exact).max() <= 3 * entry["approx_error"] * abs(delta) + 1e-5


class DictPredictor(Predictor):
    """Named inputs and outputs, as a custom predictor may take and give them."""

    @classmethod
    def from_path(cls, model_dir: str) -> DictPredictor:
        return cls()

    def predict(self, instances: Any, **kwargs: Any) -> Any:
        return [{"total": 2 * r["a"] - 3 * r["b"] + r["a"] * r["c"], "label": "x"}
                for r in instances]


def test_named_inputs_several_baselines_averaged(tmp_path: Path) -> None:
    inputs = {"alpha": {"input_tensor_name": "a", "input_baselines": [0, 1]},
              "beta": {"input_tensor_name": "b", "input_baselines": [0, 0]}}
    (tmp_path / metadata.FILE_NAME).write_text(json.dumps(
        {"inputs": inputs, "outputs": {"out": {"output_tensor_name": "total"}}}))
    entry = one(explainers.explain(DictPredictor(), SHAPLEY, str(tmp_path),
                                   [{"a": 2.0, "b": 1.0, "c": 4.0}], {}))
    # a enters as 2a + a*c = 6a (c held at 4): linear, so exact for both baselines
    assert entry["attributions"] == pytest.approx({"alpha": (12 + 6) / 2, "beta": -3.0})
    assert entry["example_score"] == 2 * 2 - 3 + 8
    assert entry["baseline_score"] == pytest.approx((0 + 6) / 2)


def test_errors_of_an_explain_call(tmp_path: Path) -> None:
    predictor = SklearnPredictor(sklearn_interactions(tmp_path))
    model_dir = str(write_metadata(tmp_path / "m"))
    with pytest.raises(InvalidArgument, match="xraiAttribution needs a differentiable TensorFlow"):
        explainers.explain(predictor, {"xraiAttribution": {}}, model_dir, [X], {})
    with pytest.raises(InvalidArgument, match="needs a differentiable TensorFlow"):
        explainers.explain(predictor, {"integratedGradientsAttribution": {}}, model_dir, [X], {})
    with pytest.raises(FailedPrecondition, match="does not fit the instance's shape"):
        explainers.explain(predictor, SHAPLEY, model_dir, [[1.0, 2.0]], {})
    with pytest.raises(InvalidArgument, match="must name its key with input_tensor_name"):
        explainers.explain(predictor, SHAPLEY, model_dir, [{"data": X}], {})
    named = write_metadata(tmp_path / "named", {"x": {"input_tensor_name": "x"},
                                                "y": {"input_tensor_name": "y"}})
    with pytest.raises(InvalidArgument, match="must be an object with the key 'x'"):
        explainers.explain(predictor, SHAPLEY, str(named), [X], {})


# --- bounds: the whole request's work, and a caller who has gone ---------------------------

class CountingPredictor(Predictor):
    """A linear model that counts the rows it is asked for."""

    rows = 0

    @classmethod
    def from_path(cls, model_dir: str) -> CountingPredictor:
        return cls()

    def predict(self, instances: Any, **kwargs: Any) -> Any:
        self.rows += len(instances)
        return [float(sum(row)) for row in instances]


def test_the_whole_requests_work_is_bounded_before_the_model_runs(tmp_path: Path) -> None:
    """The bound is on the request, not each instance: 157,284 three-feature instances at 50
    paths (~31 million model rows) are refused without a model call."""
    model_dir = str(write_metadata(tmp_path / "m"))
    shapley_50 = {"sampledShapleyAttribution": {"numPaths": 50}}
    predictor = CountingPredictor()
    with pytest.raises(InvalidArgument, match="more than 200000 model evaluations") as caught:
        explainers.explain(predictor, shapley_50, model_dir, [X] * 157_284, {})
    assert predictor.rows == 0
    assert "Send fewer instances" in caught.value.message
    # One instance costs 1 + 1 x (1 + 50 x 4) = 202 rows: 990 fit, 991 do not.
    assert len(explainers.explain(predictor, shapley_50, model_dir, [X] * 990, {})) == 990
    assert predictor.rows == 990 * 202
    with pytest.raises(InvalidArgument):
        explainers.explain(predictor, shapley_50, model_dir, [X] * 991, {})


def test_work_stops_when_the_caller_has_gone(tmp_path: Path) -> None:
    from core.errors import Cancelled

    model_dir = str(write_metadata(tmp_path / "m"))
    predictor = CountingPredictor()
    asked = []

    def stop() -> bool:  # the caller leaves once the first instance is explained
        asked.append(predictor.rows)
        return predictor.rows > 0

    with pytest.raises(Cancelled, match="the explanation was stopped"):
        explainers.explain(predictor, SHAPLEY, model_dir, [X] * 500, {}, stop=stop)
    assert 0 < predictor.rows <= 1 + 1 + 20 * 4  # within the first instance, of 500
