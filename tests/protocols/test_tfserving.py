"""TF Serving REST API over the registry: status, metadata, predict, classify, regress, errors.

One app per module over SavedModels built here both ways (TF2 save, TF1 builder) plus
scikit-learn, XGBoost and custom models, in the default project `p`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.settings import Settings
from tests.kit import iamkit, modelkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from app import create_app
    from tests.kit import tfmodels

    base = tmp_path_factory.mktemp("tfs")
    tf2, tf1 = tfmodels.tf2_model(base / "tf2"), tfmodels.tf1_model(base / "tf1")
    modelkit.sklearn_model(base / "iris")
    modelkit.xgboost_model(base / "xgb")
    modelkit.custom_model_dir(base / "scale", factor=2.0)
    package = modelkit.custom_package(base / "pkg", kind="dir")
    (base / "corrupt").mkdir()
    (base / "corrupt" / "saved_model.pb").write_bytes(b"not a SavedModel")
    config = modelkit.bootstrap_file(base / "bootstrap.yaml", {
        "tf2": {"defaultVersion": "v1", "serving": {"labels": {"stable": "v1", "canary": 2, "gone": "v9"}},
                "versions": {"v1": {"deploymentUri": str(tf2)}, "v2": {"deploymentUri": str(tf2)}}},
        "tf1": {"versions": {"prod": {"deploymentUri": str(tf1), "framework": "TENSORFLOW",
                                      "serving": {"tfServingVersion": 7}}}},
        "unnumbered": {"serving": {"labels": {"live": "prod"}},
                       "versions": {"prod": {"deploymentUri": str(tf1)}}},
        "iris": {"versions": {"v1": {"deploymentUri": str(base / "iris")}}},
        "xgb": {"versions": {"v1": {"deploymentUri": str(base / "xgb")}}},
        "scale": {"versions": {"v1": {"deploymentUri": str(base / "scale"), "packageUris": [str(package)],
                                      "predictionClass": "scale_predictor.ScalePredictor"}}},
        "broken": {"versions": {"v1": {"deploymentUri": str(base / "nowhere")}}},
        "corrupt": {"versions": {"v1": {"deploymentUri": str(base / "corrupt")}}},
    })
    settings = Settings(state_dir=base / "state", config_file=config, default_project="p",
                        max_request_bytes=100_000)
    return create_app(settings, warm=False).test_client()


def call(client: Any, path: str, body: Any = None) -> tuple[int, Any]:
    if body is None:
        response = client.get(path)
    else:
        response = client.post(path, data=body if isinstance(body, (str, bytes)) else json.dumps(body))
    assert response.mimetype == "application/json"
    # json accepts NaN / Infinity; TF Serving writes string tensors' bytes as they are (not UTF-8: 0xff)
    return response.status_code, json.loads(response.data.decode("utf-8", "surrogateescape"))


def ok(state: str = "AVAILABLE", version: str = "1", code: str = "OK", message: str = "") -> dict[str, Any]:
    return {"version": version, "state": state, "status": {"error_code": code, "error_message": message}}


# -- model status -----------------------------------------------------------------------------

def test_status_lists_every_numbered_version_newest_first(client: Any) -> None:
    assert call(client, "/v1/models/tf2") == (200, {"model_version_status": [ok(version="2"), ok()]})


@pytest.mark.parametrize(("path", "version"), [
    ("/v1/models/tf2/versions/1", "1"), ("/v1/models/tf2/labels/canary", "2"),
    ("/v1/models/tf2/labels/stable", "1"), ("/v1/models/tf1/versions/7", "7"),
])
def test_status_of_one_version(client: Any, path: str, version: str) -> None:
    assert call(client, path) == (200, {"model_version_status": [ok(version=version)]})


def test_status_reports_versions_that_cannot_serve(client: Any) -> None:
    status, body = call(client, "/v1/models/broken")
    [entry] = body["model_version_status"]
    assert (status, entry["state"], entry["status"]["error_code"]) == (200, "END", "FAILED_PRECONDITION")
    assert "does not exist" in entry["status"]["error_message"]
    [entry] = call(client, "/v1/models/corrupt")[1]["model_version_status"]
    assert entry["state"] == "END" and "Could not load the model" in entry["status"]["error_message"]


@pytest.mark.parametrize(("path", "status", "error"), [
    ("/v1/models/nope", 404, "Could not find any versions of model nope"),
    ("/v1/models/tf2/versions/9", 404, "Could not find version 9 of model tf2"),
    ("/v1/models/tf2/labels/nope", 400, "Unrecognized servable version label: nope"),
    ("/v1/models", 400, "Missing model name in request."),
    ("/v1/models/tf2/versions/v1", 400, "Malformed request: GET /v1/models/tf2/versions/v1"),
])
def test_status_errors(client: Any, path: str, status: int, error: str) -> None:
    assert call(client, path) == (status, {"error": error})


# -- metadata ---------------------------------------------------------------------------------

def test_metadata_of_a_tensorflow_model(client: Any) -> None:
    status, body = call(client, "/v1/models/tf1/versions/7/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "tf1", "signature_name": "", "version": "7"}
    defs = body["metadata"]["signature_def"]["signature_def"]
    assert sorted(defs) == ["classify_x", "serving_default", "tensorflow/serving/regress"]
    assert defs["serving_default"]["inputs"]["x"] == {
        "name": "x:0", "dtype": "DT_FLOAT",
        "tensor_shape": {"dim": [{"size": "-1", "name": ""}], "unknown_rank": False}}
    assert defs["classify_x"]["method_name"] == "tensorflow/serving/classify"
    assert call(client, "/v1/models/tf2/labels/canary/metadata")[1]["model_spec"]["version"] == "2"


def test_metadata_of_a_scikit_learn_model(client: Any) -> None:
    status, body = call(client, "/v1/models/iris/metadata")
    sig = body["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert (status, body["model_spec"]["version"]) == (200, "1")
    assert sig["method_name"] == "tensorflow/serving/predict"
    assert sig["inputs"]["input-0"]["dtype"] == "DT_DOUBLE"
    assert sig["inputs"]["input-0"]["tensor_shape"]["dim"] == [{"size": "-1", "name": ""},
                                                               {"size": "4", "name": ""}]


# -- predict ----------------------------------------------------------------------------------

def test_row_and_columnar_with_named_inputs_and_outputs(client: Any) -> None:
    rows = {"instances": [{"a": [1.0, 2.0], "b": 3.0}, {"a": [0.5, 0.25], "b": -2.0}]}
    assert call(client, "/v1/models/tf2:predict", rows) == (200, {"predictions": [
        {"scaled": [3.0, 6.0], "total": 6.0}, {"scaled": [-1.0, -0.5], "total": -1.25}]})
    columns = {"inputs": {"a": [[1.0, 2.0], [0.5, 0.25]], "b": [3.0, -2.0]}}
    assert call(client, "/v1/models/tf2:predict", columns) == (200, {"outputs": {
        "scaled": [[3.0, 6.0], [-1.0, -0.5]], "total": [6.0, -1.25]}})


@pytest.mark.parametrize(("body", "expected"), [
    ({"signature_name": "half", "instances": [1.0, 2.0, 5.0]}, {"predictions": [3.5, 4.0, 5.5]}),
    ({"signature_name": "half", "instances": [{"x": 1.0}]}, {"predictions": [3.5]}),
    ({"signature_name": "half", "inputs": [1.0, 2.0]}, {"outputs": [3.5, 4.0]}),
    ({"signature_name": "half", "inputs": {"x": [1.0, 2.0]}}, {"outputs": [3.5, 4.0]}),
])
def test_single_input_forms(client: Any, body: dict[str, Any], expected: dict[str, Any]) -> None:
    assert call(client, "/v1/models/tf2/labels/stable:predict", body) == (200, expected)


def test_versions_by_number_and_tf1_exports(client: Any) -> None:
    assert call(client, "/v1/models/tf1/versions/7:predict", {"instances": [1.0, 2.5]}) == \
        (200, {"predictions": [2.0, 5.0]})
    assert call(client, "/v1/models/tf2/versions/2:predict",
                {"signature_name": "half", "instances": [0.0]}) == (200, {"predictions": [3.0]})


def test_a_version_without_a_number_serves_as_default_and_by_label(client: Any) -> None:
    assert call(client, "/v1/models/unnumbered:predict", {"instances": [1.0]}) == \
        (200, {"predictions": [2.0]})
    assert call(client, "/v1/models/unnumbered/labels/live:predict", {"inputs": [1.0]}) == \
        (200, {"outputs": [2.0]})
    assert call(client, "/v1/models/unnumbered/metadata")[1]["model_spec"] == {
        "name": "unnumbered", "signature_name": ""}  # no number to report
    assert call(client, "/v1/models/unnumbered") == (404, {"error": "Could not find any versions of model "
                                                                    "unnumbered"})


def test_b64_in_and_out(client: Any) -> None:
    rows = {"signature_name": "text", "instances": [{"b64": "aGk="}, "abc"]}
    assert call(client, "/v1/models/tf2:predict", rows) == (200, {"predictions": [
        {"echo_bytes": {"b64": "aGk="}, "length": 2, "upper": "HI"},
        {"echo_bytes": {"b64": "YWJj"}, "length": 3, "upper": "ABC"}]})
    columns = {"signature_name": "text", "inputs": {"text_bytes": [{"b64": "/w=="}]}}
    assert call(client, "/v1/models/tf2:predict", columns)[1]["outputs"]["echo_bytes"] == [{"b64": "/w=="}]


def test_nan_and_infinity_in_and_out(client: Any) -> None:
    response = client.post("/v1/models/tf2:predict",
                           data='{"signature_name": "half", "instances": [NaN, Infinity, -Infinity, 0.2]}')
    assert response.status_code == 200
    # 0.5 * 0.2 + 3 in float32 prints as 3.1 (shortest float32 form), not 3.0999999046325684
    assert response.data == b'{\n    "predictions": [NaN, Infinity, -Infinity, 3.1\n    ]\n}'


def test_classify_with_context_and_regress(client: Any) -> None:
    status, plain = call(client, "/v1/models/tf1:classify",
                         {"signature_name": "classify_x", "examples": [{"x": 1.0}]})
    [[[neg, neg_score], [pos, pos_score]]] = plain["results"]
    assert (status, neg, pos) == (200, "neg", "pos")
    assert pos_score == pytest.approx(0.98201376) and neg_score == pytest.approx(0.01798621)
    status, with_context = call(client, "/v1/models/tf1:classify", {
        "signature_name": "classify_x", "context": {"bias": 1.0}, "examples": [{"x": 1.0}, {"x": -1.0}]})
    assert status == 200 and len(with_context["results"]) == 2
    assert with_context["results"][0][1][1] == pytest.approx(0.9975274)  # softmax z = 2 * 1 + 1 = 3
    assert call(client, "/v1/models/tf1/versions/7:regress", {
        "signature_name": "tensorflow/serving/regress", "context": {"bias": 0.5},
        "examples": [{"x": 1.0}, {"x": [2.0]}]}) == (200, {"results": [2.5, 4.5]})


@pytest.mark.parametrize(("path", "body", "error"), [
    ("/v1/models/tf2:predict", {"instances": [1.0], "inputs": [1.0]},
     'JSON Value: {\n    "instances": [1.0],\n    "inputs": [1.0]\n} Not formatted correctly expecting '
     "only one of 'inputs' or 'instances' keys to exist "),
    ("/v1/models/tf2:predict", {"signature_name": "half"}, "Missing 'inputs' or 'instances' key"),
    ("/v1/models/tf2:predict", {"instances": {"a": 1}},
     'JSON Value: {\n    "instances": {\n        "a": 1\n    }\n} Expecting \'instances\' to be an '
     "list/array"),
    ("/v1/models/tf2:predict", {"instances": []},
     'JSON Value: {\n    "instances": []\n} No values in \'instances\' array'),
    ("/v1/models/tf2:predict", {"instances": [[1.0, 2.0]]},
     "instances is a plain list, but expecting list of objects as multiple input tensors required as "
     "per tensorinfo_map"),
    ("/v1/models/tf2:predict", {"instances": [{"a": [1.0, 2.0], "b": 1.0}, {"a": [1.0], "b": 1.0}]},
     "Failed to process element: 1 key: a of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor "
     "size: 2 but got: 1"),
    ("/v1/models/tf2:predict", {"inputs": {"a": [[1.0, 2.0], [3.0]], "b": [1.0, 2.0]}},
     "Encountered list at unexpected size: 1 at level: 1 expected size: 2"),
    ("/v1/models/tf2:predict", {"inputs": {"a": [[1.0, 2.0]]}}, "Missing named input: b in 'inputs' object."),
    ("/v1/models/tf2:predict", {"signature_name": "half", "instances": ["x"]},
     'Failed to process element: 0 of \'instances\' list. Error: INVALID_ARGUMENT: JSON Value: "x" Type: '
     "String is not of expected type: float"),
    ("/v1/models/tf2:predict", {"signature_name": "nope", "instances": [1.0]},
     'Serving signature name: "nope" not found in signature def'),
    ("/v1/models/tf2:predict", {"signature_name": 5, "instances": [1.0]},
     'JSON Value: {\n    "signature_name": 5,\n    "instances": [1.0]\n} not formatted correctly. '
     "'signature_name' key must be a string value."),
    ("/v1/models/tf1:classify", {"examples": [{"x": 1.0}]},
     "Expected classification signature method_name to be tensorflow/serving/classify. "
     "Was: tensorflow/serving/predict"),
    ("/v1/models/tf1:regress", {"signature_name": "tensorflow/serving/regress"},
     'JSON Value: {\n    "signature_name": "tensorflow/serving/regress"\n} When method is classify, key '
     "'examples' is expected and was not found"),
    ("/v1/models/tf1:regress", {"examples": []},
     'JSON Value: {\n    "examples": []\n} \'examples\' value is an empty array'),
    ("/v1/models/tf1:classify", {"signature_name": "classify_x", "examples": [{"x": [1.0, "a"]}]},
     "Unexpected element type in feature: x expecting type: float"),
    ("/v1/models/iris:classify", {"examples": [{"x": 1.0}]},
     ":classify needs a TensorFlow SavedModel with a tensorflow/serving/classify signature; this model's "
     "framework is SCIKIT_LEARN."),
    ("/v1/models/tf2:explain", {"instances": [1.0]}, "Malformed request: POST /v1/models/tf2:explain"),
    ("/v1/models/tf2:predict", {"signature_name": "half", "instances": [json.loads("[" * 99 + "]" * 99)]},
     "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value is a list "
     "nested 99 deep; a tensor has at most 63 dimensions here"),
])
def test_bad_requests_are_400_with_tf_serving_messages(client: Any, path: str, body: Any, error: str) -> None:
    assert call(client, path, body) == (400, {"error": error})


def test_batch_dimension_mismatch_is_a_clear_400(client: Any) -> None:
    status, body = call(client, "/v1/models/tf2:predict", {"inputs": {"a": [[1.0, 2.0], [3.0, 4.0]],
                                                                 "b": [1.0, 2.0, 3.0]}})
    assert status == 400 and body["error"].startswith("Incompatible shapes: ")  # the runtime's own words
    assert call(client, "/v1/models/tf2:predict", {"signature_name": "uneven", "instances": [1.0, 2.0]}) == \
        (400, {"error": "Tensor name: first has inconsistent batch size: 1 expecting: 2"})
    assert call(client, "/v1/models/tf2:predict", {"signature_name": "uneven", "inputs": [1.0, 2.0]}) == \
        (200, {"outputs": {"all": [1.0, 2.0], "first": [1.0]}})  # columnar has no batch rule


@pytest.mark.parametrize(("path", "status", "error"), [
    ("/v1/models/half:predict", 404, "Servable not found for request: Latest(half)"),
    ("/v1/models/tf2/versions/9:predict", 404, "Servable not found for request: Specific(tf2, 9)"),
    ("/v1/models/tf2/labels/nope:predict", 400, "Unrecognized servable version label: nope"),
    ("/v1/models/tf2/labels/gone:predict", 404, "Servable not found for request: Specific(tf2, v9)"),
    ("/v1/models/half/metadata", 404, "Servable not found for request: Latest(half)"),
])
def test_unknown_servables(client: Any, path: str, status: int, error: str) -> None:
    body = None if path.endswith("metadata") else {"instances": [1.0, 2.0, 5.0]}
    assert call(client, path, body) == (status, {"error": error})


@pytest.mark.parametrize(("body", "error"), [
    (b"", "JSON Parse error: The document is empty"),
    (b'{"instances": [1.0,', "JSON Parse error: "),
    (b"[1, 2]", "JSON Value: [1, 2] Is not object"),
    (b'{"instances": [' + b"1.0," * 30_000 + b"1.0]}",
     "Request payload size exceeds the limit: 100000 bytes."),
])
def test_malformed_bodies(client: Any, body: bytes, error: str) -> None:
    status, answer = call(client, "/v1/models/tf2:predict", body)
    assert status == 400 and answer["error"].startswith(error)


def test_wrong_method_is_tf_servings_malformed_request(client: Any) -> None:
    assert call(client, "/v1/models/tf2:predict", None) == \
        (400, {"error": "Malformed request: GET /v1/models/tf2:predict"})
    response = client.put("/v1/models/tf2:predict", data="{}")
    assert (response.status_code, response.get_json()) == \
        (400, {"error": "Malformed request: PUT /v1/models/tf2:predict"})


# -- other frameworks, and the same numbers as AI Platform ------------------------------------

@pytest.mark.parametrize(("model", "instances"), [
    ("iris", [[0.1, -0.2, 0.3, 1.0], [-1.0, -1.0, 0.5, 0.0]]),
    ("xgb", [[0.5, -0.5, float("nan")], [-1.0, 1.0, 0.0]]),
    ("scale", [[1.0, 2.0], [3.0, 4.5]]),
])
def test_other_frameworks_answer_predict_like_ai_platform(client: Any, model: str,
                                                         instances: list[Any]) -> None:
    status, expected = call(client, f"/v1/projects/p/models/{model}:predict", {"instances": instances})
    assert status == 200
    assert call(client, f"/v1/models/{model}:predict", {"instances": instances}) == \
        (200, {"predictions": expected["predictions"]})
    assert call(client, f"/v1/models/{model}/versions/1:predict", {"inputs": instances}) == \
        (200, {"outputs": expected["predictions"]})
    other = {"signature_name": "other", "instances": instances}
    assert call(client, f"/v1/models/{model}:predict", other)[0] == 400


@pytest.mark.parametrize("body", [
    {"instances": [{"a": [1.5, -2.25], "b": 0.1}, {"a": [1e-3, 7.0], "b": 3.0}]},
    {"signature_name": "half", "instances": [0.2, -7.3, 1e6]},
    {"signature_name": "text", "instances": [{"b64": "AAEC"}, "zz"]},
])
def test_same_tf_model_same_numbers_through_ai_platform_and_tf_serving(client: Any,
                                                                      body: dict[str, Any]) -> None:
    ai = client.post("/v1/projects/p/models/tf2:predict", data=json.dumps(body))
    tfs = client.post("/v1/models/tf2:predict", data=json.dumps(body))
    assert ai.status_code == tfs.status_code == 200
    # Same decoding, same float32 numbers; each protocol writes them its own way (TF Serving
    # pretty-prints, and writes 9 digits where 6 do not read back: -0.650000095, not -0.6500001).
    assert _float32(json.loads(ai.data)) == _float32(json.loads(tfs.data))


def _float32(value: Any) -> Any:
    if isinstance(value, float):
        return float(np.float32(value))
    if isinstance(value, list):
        return [_float32(v) for v in value]
    if isinstance(value, dict):
        return {k: _float32(v) for k, v in value.items()}
    return value


def test_ai_platform_reports_tf_input_errors_as_prediction_failed(client: Any) -> None:
    status, body = call(client, "/v1/projects/p/models/tf2:predict", {"instances": [[1.0, 2.0]]})
    assert status == 400 and body["error"].startswith("Prediction failed: instances is a plain list")


def test_iam_applies_to_tf_serving_routes(make_app: Any, tmp_path: Path) -> None:
    modelkit.sklearn_model(tmp_path / "iris")
    config = modelkit.bootstrap_file(tmp_path / "b.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(tmp_path / "iris")}}}})
    iam = iamkit.write_config(tmp_path / "iam.yaml",
                              {"staticTokens": {"nobody": "user:nobody@example.com"}})
    enforced = make_app(config, default_project="p", iam_mode="enforce", iam_config=iam)
    who = iamkit.bearer("nobody")
    denied = enforced.post("/v1/models/iris:predict", json={"instances": [[1, 2, 3, 4]]},
                           headers=who)
    assert (denied.status_code, denied.get_json()) == (403, {
        "error": "Permission 'ml.models.predict' denied on resource 'projects/p/models/iris' "
                 "(or it may not exist)."})
    assert enforced.get("/v1/models/iris/versions/1", headers=who).status_code == 403
    assert enforced.get("/v1/models/nope/metadata", headers=who).status_code == 403  # no lookup
    anonymous = enforced.post("/v1/models/iris:predict", json={"instances": [[1, 2, 3, 4]]})
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"] == 'Bearer realm="https://accounts.google.com/"'
    assert anonymous.get_json()["error"].startswith("Request is missing required authentication")
