"""The seed documents' own examples against an in-process app (issue 34, items 9-14).

Each test cites where the real server answers so; the models are built here: half_plus_three
(TF Serving's testdata export, y = 0.5 * x + 3), scikit-learn, XGBoost and a custom predictor.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.settings import Settings
from tests.kit import modelkit

pytestmark = pytest.mark.slow
PROJECT = "mlemu"
#: What tests/tfmodels.py's tf2 serving_default computes (total = sum(a) + b, scaled = a * b),
#: as a custom prediction routine: one object per instance, keyed by output name.
MULTI_SOURCE = """
class MultiPredictor:
    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        out = []
        for item in instances:
            a, b = (item["a"], item["b"]) if isinstance(item, dict) else (item[:2], item[2])
            out.append({"total": sum(a) + b, "scaled": [v * b for v in a]})
        return out
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.kit import tfmodels

    root = tmp_path_factory.mktemp("seeds")
    tfmodels.half_plus_two(root / "hp3", b=3.0)
    tfmodels.half_plus_two(root / "hp2")
    tfmodels.tf2_model(root / "tf2")
    modelkit.sklearn_model(root / "sk", "logreg", features=4)
    modelkit.xgboost_model(root / "xgb", features=3)
    modelkit.custom_package(root / "pkg", "multi_predictor", MULTI_SOURCE, kind="dir")
    (root / "multi").mkdir()
    return root


def make_client(base: Any, tmp_path_factory: pytest.TempPathFactory, **changes: Any) -> Any:
    from app import create_app

    config = modelkit.bootstrap_file(base / "bootstrap.yaml", {
        "half_plus_three": {"versions": {"v1": {"deploymentUri": str(base / "hp3"),
                                                "framework": "TENSORFLOW"}}},
        # The default version is v1 (x/2 + 2); the highest numbered is v2 (x/2 + 3).
        "two": {"defaultVersion": "v1", "versions": {"v1": {"deploymentUri": str(base / "hp2")},
                                                     "v2": {"deploymentUri": str(base / "hp3")}}},
        "tf2": {"versions": {"v1": {"deploymentUri": str(base / "tf2")}}},
        "sk": {"versions": {"v1": {"deploymentUri": str(base / "sk")}}},
        "xgb": {"versions": {"v1": {"deploymentUri": str(base / "xgb")}}},
        "multi": {"versions": {"v1": {
            "deploymentUri": str(base / "multi"), "predictionClass": "multi_predictor.MultiPredictor",
            "packageUris": [str(base / "pkg" / "multi_predictor_src")]}}},
    }, project=PROJECT)
    settings = Settings(state_dir=tmp_path_factory.mktemp("state"), config_file=config,
                        default_project=PROJECT, **changes)
    return create_app(settings, warm=False).test_client()


@pytest.fixture(scope="module")
def client(base: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_client(base, tmp_path_factory)


def post(client: Any, path: str, body: Any) -> tuple[int, Any]:
    response = client.post(path, data=body if isinstance(body, (str, bytes)) else json.dumps(body),
                           content_type="application/json")
    return response.status_code, json.loads(response.data)


# -- item 9: grps feeds unnamed tensors by position ------------------------------------------

def test_grps_ndarray_reaches_a_tensorflow_model(client: Any) -> None:
    """003's headline example on half_plus_three: grps's ndarray is an unnamed DT_FLOAT32 tensor
    (NetEase-Media/grps server/cpp_server/src/handler/grps_handler.cc, ParseNDArray) that
    TfModelInferer::Infer feeds as the signature's input at its position (tf_inferer.cc)."""
    status, body = post(client, "/grps/v1/infer/predict?model=half_plus_three",
                        {"ndarray": [[1.0], [2.0], [5.0]]})
    assert status == 200, body
    [out] = body["gtensors"]["tensors"]
    assert (out["name"], out["dtype"], out["shape"]) == ("y", "DT_FLOAT32", [3, 1])
    assert out["flat_float32"] == [3.5, 4.0, 5.5]
    # ndarray back, as 003's return-ndarray example
    status, body = post(client, "/grps/v1/infer/predict?model=half_plus_three&return-ndarray=true",
                        {"ndarray": [[1.0], [2.0]]})
    assert (status, body["ndarray"]) == (200, [[3.5], [4.0]])


def test_grps_unnamed_gtensor_and_wrongly_named_one(client: Any) -> None:
    unnamed = {"dtype": "DT_FLOAT32", "shape": [2, 1], "flat_float32": [1.0, 3.0]}
    status, body = post(client, "/grps/v1/infer/predict?model=half_plus_three",
                        {"gtensors": {"tensors": [unnamed]}})
    assert status == 200, body
    assert body["gtensors"]["tensors"][0]["flat_float32"] == [3.5, 4.5]
    # A name the model lacks, in grps's words (tf_inferer.cc, Infer)
    status, body = post(client, "/grps/v1/infer/predict?model=half_plus_three",
                        {"gtensors": {"tensors": [dict(unnamed, name="in")]}})
    assert status == 400
    assert body["status"]["msg"] == ("Failed to infer model, error: input name in not defined in "
                                     "model")
    # All named or all unnamed (tf_tensor_converter.cc, TfTensorConverter::PreProcess)
    status, body = post(client, "/grps/v1/infer/predict?model=half_plus_three",
                        {"gtensors": {"tensors": [dict(unnamed, name="x"), unnamed]}})
    assert status == 400 and "should all have name or all have no name" in body["status"]["msg"]
    # More unnamed tensors than inputs
    status, body = post(client, "/grps/v1/infer/predict?model=half_plus_three",
                        {"gtensors": {"tensors": [unnamed, unnamed]}})
    assert status == 400 and body["status"]["msg"] == (
        "Failed to infer model, error: input count not match, input count: 2, model input count: 1")


# -- item 14: return-ndarray converts one DT_FLOAT32 tensor only -------------------------------

def test_grps_return_ndarray_refuses_other_dtypes(client: Any) -> None:
    """grps_handler.cc GenNDArrayFromGrpsMsg: "NDArray only support float32"; a logistic
    regression's classes are DT_INT64."""
    status, body = post(client, "/grps/v1/infer/predict?model=sk&return-ndarray=true",
                        {"ndarray": [[0.5, -1.0, 2.0, 0.1]]})
    assert status == 400, body
    assert body["status"] == {"code": 400, "msg": "NDArray only support float32",
                              "status": "FAILURE"}
    assert "ndarray" not in body
    status, body = post(client, "/grps/v1/infer/predict?model=xgb&return-ndarray=true",
                        {"ndarray": [[0.5, -1.0, 2.0]]})
    assert status == 200 and len(body["ndarray"]) == 1


# -- item 10: TF Serving's versionless routes serve the latest version -------------------------

@pytest.mark.parametrize("path", ["/v1/models/two:predict", "/v1/models/two:regress"])
def test_tfserving_latest_is_the_highest_numbered_version(client: Any, path: str) -> None:
    """000/001: "/versions/${VERSION} or /labels/${LABEL} is optional. If omitted the latest
    version is used"; TF Serving's ServableRequest::Latest is the highest loaded version
    (tensorflow/serving tensorflow_serving/core/manager.h). v2 (x/2 + 3) is latest, v1 default."""
    body: dict[str, Any] = {"instances": [[1.0]]}
    if path.endswith("regress"):
        body = {"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]}
    status, answer = post(client, path, body)
    key = "results" if path.endswith("regress") else "predictions"
    assert (status, answer[key]) == (200, [[3.5]] if key == "predictions" else [3.5])
    status, answer = post(client, "/v1/models/two/versions/1:predict", {"instances": [[1.0]]})
    assert (status, answer["predictions"]) == (200, [[2.5]])
    # ml v1 keeps its default version
    status, answer = post(client, f"/v1/projects/{PROJECT}/models/two:predict",
                          {"instances": [[1.0]]})
    assert (status, answer["predictions"]) == (200, [[2.5]])


def test_tfserving_latest_metadata(client: Any) -> None:
    body = json.loads(client.get("/v1/models/two/metadata").data)
    assert body["model_spec"]["version"] == "2"


def test_default_version_on_request(base: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """MLEMU_TFSERVING_UNVERSIONED=default: the ml v1 default version, as before."""
    old = make_client(base, tmp_path_factory, tfserving_unversioned="default")
    status, answer = post(old, "/v1/models/two:predict", {"instances": [[1.0]]})
    assert (status, answer["predictions"]) == (200, [[2.5]])


# -- item 11: a b64 value that is not a serialized tf.Example -----------------------------------

@pytest.mark.parametrize("b64", ["X5ad6u", "gA=="])
@pytest.mark.parametrize("path", ["/v1/models/half_plus_three:predict",
                                  f"/v1/projects/{PROJECT}/models/half_plus_three:predict"])
def test_b64_that_is_not_a_tf_example(client: Any, path: str, b64: str) -> None:
    """004's own `{"b64": "X5ad6u"}` instance to a signature reading serialized tf.Example:
    TensorFlow's ParseExample words (tensorflow/core/util/example_proto_fast_parsing.cc, "Could
    not parse example input, value: '...'"), not a Python codec's."""
    status, body = post(client, path, {"signature_name": "regress_x_to_y",
                                       "instances": [{"b64": b64}]})
    assert status == 400
    assert "Could not parse example input, value: '" in body["error"]
    assert "codec" not in body["error"] and "utf-8" not in body["error"]


# -- item 12: one layout for every framework --------------------------------------------------

def test_columnar_outputs_of_several_outputs_as_tensorflow_writes_them(client: Any) -> None:
    """000 ("Response format"): columnar answers are one object keyed by output name, each
    holding the output's whole batch (json_tensor.cc MakeColumnarFormatJsonFromTensors), and row
    answers one object per instance, both in rapidjson's PrettyWriter layout. The TensorFlow
    model computing the same outputs is the oracle, byte for byte."""
    rows = [{"a": [1.0, 2.0], "b": 2.0}, {"a": [-1.0, 0.5], "b": 0.5}]
    columns = {"a": [[1.0, 2.0], [-1.0, 0.5]], "b": [2.0, 0.5]}
    for body, custom_body in ((rows, rows), (columns, [[1.0, 2.0, 2.0], [-1.0, 0.5, 0.5]])):
        key = "instances" if body is rows else "inputs"
        expected = client.post("/v1/models/tf2:predict", data=json.dumps({key: body}))
        answer = client.post("/v1/models/multi:predict", data=json.dumps({key: custom_body}))
        assert expected.status_code == answer.status_code == 200
        assert answer.data == expected.data
    answer = json.loads(client.post("/v1/models/multi:predict", data=json.dumps(
        {"inputs": [[1.0, 2.0, 2.0], [-1.0, 0.5, 0.5]]})).data)
    assert answer == {"outputs": {"scaled": [[2.0, 4.0], [-0.5, 0.25]], "total": [5.0, 0.0]}}


def test_single_output_of_other_frameworks_is_pretty(client: Any) -> None:
    answer = client.post("/v1/models/sk:predict", data=json.dumps(
        {"inputs": [[0.5, -1.0, 2.0, 0.1], [1.0, 1.0, 1.0, 1.0]]}))
    assert answer.status_code == 200
    assert answer.data.startswith(b'{\n    "outputs": [\n        ')


def test_values_no_tensor_holds_keep_the_pretty_layout() -> None:
    """Ragged lists and nested objects: rapidjson's PrettyWriter layout, which Python's json
    module with a 4-space indent shares for such values."""
    from protocols.tfserving_objects import predict_body

    ragged = [[1, 2], [3], {"k": ["a", None, True]}, []]
    assert predict_body(ragged, rows=True) == json.dumps(
        {"predictions": ragged}, indent=4).encode()
    keyed = [{"x": [1], "y": "a"}, {"x": [2, 3], "y": "b"}]
    assert predict_body(keyed, rows=False) == json.dumps(
        {"outputs": {"x": [[1], [2, 3]], "y": ["a", "b"]}}, indent=4).encode()


# -- item 13: V2 platform names -----------------------------------------------------------------

@pytest.mark.parametrize(("model", "platform"), [
    ("sk", ""), ("xgb", ""), ("multi", ""), ("half_plus_three", "tensorflow_savedmodel")])
def test_v2_platform_is_one_of_the_protocols_names_or_empty(client: Any, model: str,
                                                            platform: str) -> None:
    """002 ("Platforms"): `<project>_<format>` names only (tensorflow_savedmodel, onnx_onnxv1,
    ...); KServe answers "" for the models it serves (kserve/kserve python/kserve/kserve/
    protocol/dataplane.py, model_metadata)."""
    meta = json.loads(client.get(f"/v2/models/{model}").data)
    assert meta["platform"] == platform
