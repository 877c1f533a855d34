"""AI Explanations as AI Platform answered them (issue 34, items 1 and 3), through ml v1's
`:explain` on an in-process app.

1. An input with `index_feature_mapping` is answered per feature name, each name's attribution
   a list Google's tabular sample reads as `attributions[feature_name][0]`
   (GoogleCloudPlatform/ai-platform-samples notebooks/samples/explanations/
   ai-explanations-tabular.ipynb); bag encodings need the mapping (explainable_ai_sdk
   common/explain_metadata.py, _validate_index_feature_mapping).
3. ml v1 explained TensorFlow models only (GoogleCloudMlV1__ExplanationConfig in the discovery
   document); MLEMU_EXPLAIN_ANY_FRAMEWORK=true keeps sampled Shapley on other frameworks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.settings import Settings
from tests.kit import modelkit

pytestmark = pytest.mark.slow
P = "projects/p"
ROW = [0.8, -1.2, 2.0]
IG = {"integratedGradientsAttribution": {"numIntegralSteps": 50}}
SHAPLEY = {"sampledShapleyAttribution": {"numPaths": 10}}


def metadata(directory: Path, inputs: dict[str, Any], output: str) -> None:
    (directory / "explanation_metadata.json").write_text(json.dumps(
        {"inputs": inputs, "outputs": {output: {}}}))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.kit import tfmodels

    base = tmp_path_factory.mktemp("explain-fidelity")
    data = {"input_tensor_name": "x", "input_baselines": [[0.0, 0.0, 0.0]]}
    for name, extra in (("tf_plain", {}),
                        ("tf_bag", {"encoding": "bag_of_features",
                                    "index_feature_mapping": ["a", "b", "c"]}),
                        ("tf_identity", {"index_feature_mapping": ["a", "b", "c"]}),
                        ("tf_wrong", {"encoding": "indicator",
                                      "index_feature_mapping": ["a", "b"]})):
        tfmodels.tf1_static(base / name)
        metadata(base / name, {"data": {**data, **extra}}, "score")
    modelkit.sklearn_model(base / "sk", "forest", features=3)
    metadata(base / "sk", {"data": {"encoding": "bag_of_features",
                                    "index_feature_mapping": ["a", "b", "c"]}}, "value")
    return base


def app_client(root: Path, state: Path, **changes: Any) -> Any:
    from app import create_app

    versions = {name: {"versions": {"v1": {"deploymentUri": str(root / name),
                                           "framework": "TENSORFLOW", "explanationConfig": IG}}}
                for name in ("tf_plain", "tf_bag", "tf_identity", "tf_wrong")}
    versions["sk"] = {"versions": {"v1": {"deploymentUri": str(root / "sk"),
                                          "explanationConfig": SHAPLEY}}}
    config = modelkit.bootstrap_file(root / "boot.yaml", versions)
    settings = Settings(state_dir=state, config_file=config, default_project="p",
                        model_roots=(str(root),), **changes)
    return create_app(settings, warm=False).test_client()


@pytest.fixture(scope="module")
def client(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return app_client(root, tmp_path_factory.mktemp("state"))


def explain(client: Any, model: str, instances: list[Any]) -> tuple[int, Any]:
    response = client.post(f"/v1/{P}/models/{model}:explain",
                           data=json.dumps({"instances": instances}),
                           content_type="application/json")
    return response.status_code, json.loads(response.data)


@pytest.mark.parametrize("model", ["tf_bag", "tf_identity"])
def test_attributions_keyed_by_feature_name(client: Any, model: str) -> None:
    status, plain = explain(client, "tf_plain", [ROW])
    assert status == 200, plain
    status, body = explain(client, model, [ROW])
    assert status == 200, body
    entry = body["explanations"][0]["attributions_by_label"][0]
    attributions = entry["attributions"]
    assert sorted(attributions) == ["a", "b", "c"]
    # Google's sample: attributions[feature_name][0], one value per name
    got = [attributions[name][0] for name in ("a", "b", "c")]
    assert all(len(attributions[name]) == 1 for name in ("a", "b", "c"))
    expected = plain["explanations"][0]["attributions_by_label"][0]["attributions"]["data"]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert entry["example_score"] - entry["baseline_score"] == pytest.approx(sum(got), abs=1e-3)


def test_a_mapping_that_does_not_fit_the_input(client: Any) -> None:
    status, body = explain(client, "tf_wrong", [ROW])
    assert status == 400
    assert "index_feature_mapping of input 'data' names 2 features, but the instance's last " \
        "axis has 3" in body["error"]["message"]


def test_bag_encodings_need_a_mapping(tmp_path: Path) -> None:
    from core.errors import FailedPrecondition
    from explainers import metadata as meta

    metadata(tmp_path, {"data": {"encoding": "bag_of_features"}}, "score")
    with pytest.raises(FailedPrecondition, match="index_feature_mapping must be provided when "
                                                 "encoding is bag_of_features"):
        meta.load(str(tmp_path))


def test_ml_v1_explains_tensorflow_models_only(client: Any, root: Path) -> None:
    status, body = explain(client, "sk", [ROW])
    assert status == 400
    assert body["error"]["message"].startswith(
        "AI Explanations explain TensorFlow models only; this is a SCIKIT_LEARN model. Set "
        "MLEMU_EXPLAIN_ANY_FRAMEWORK=true")
    # refused at versions.create too when the framework is declared
    response = client.post(f"/v1/{P}/models/sk/versions", data=json.dumps({
        "name": "v2", "deploymentUri": str(root / "sk"), "framework": "SCIKIT_LEARN",
        "explanationConfig": SHAPLEY}), content_type="application/json")
    assert response.status_code == 400
    assert "explain TensorFlow models only" in json.loads(response.data)["error"]["message"]


def test_the_extension_keeps_sampled_shapley_on_other_frameworks(
        root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    extended = app_client(root, tmp_path_factory.mktemp("state"), explain_any_framework=True)
    status, body = explain(extended, "sk", [ROW])
    assert status == 200, body
    entry = body["explanations"][0]["attributions_by_label"][0]
    assert sorted(entry["attributions"]) == ["a", "b", "c"]
