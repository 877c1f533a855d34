"""Open Inference Protocol V2 with the real tritonclient (HTTP and gRPC) against a live server."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest
import requests
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.conftest import LiveServer
from tests.protocols.conftest import build_models, in_process

pytestmark = pytest.mark.slow

SK_ROWS = [[0.5, -1.0, 2.0, 0.1], [-1.5, 0.3, 0.0, 1.0], [2.0, 2.0, -2.0, 0.5]]
XGB_ROWS = [[0.5, -1.0, 2.0], [-1.5, 0.3, float("nan")], [2.0, 2.0, -2.0]]
TEXTS = ["good great", "awful terrible bad", "fine"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    """This module's server also serves TensorFlow SavedModels."""
    root = tmp_path_factory.mktemp("protocol-models")
    return root, build_models(root, tensorflow=True)


@pytest.fixture(scope="module", params=["http", "grpc"])
def triton(request: pytest.FixtureRequest, server: LiveServer) -> Any:
    """(client module, client) for each transport."""
    if request.param == "http":
        return thttp, thttp.InferenceServerClient(server.url.removeprefix("http://"))
    assert server.grpc_target
    return tgrpc, tgrpc.InferenceServerClient(server.grpc_target)


def infer_input(module: Any, name: str, array: np.ndarray, datatype: str, binary: bool) -> Any:
    tensor = module.InferInput(name, list(array.shape), datatype)
    if module is thttp:
        tensor.set_data_from_numpy(array, binary_data=binary)
    else:  # tritonclient.grpc always sends raw_input_contents (typed contents: see below)
        tensor.set_data_from_numpy(array)
    return tensor


def requested(module: Any, name: str, binary: bool) -> Any:
    if module is thttp:
        return module.InferRequestedOutput(name, binary_data=binary)
    return module.InferRequestedOutput(name)


def metadata(module: Any, client: Any, *args: Any) -> dict[str, Any]:
    if module is thttp:
        return dict(client.get_model_metadata(*args) if args else client.get_server_metadata())
    if args:
        return dict(client.get_model_metadata(*args, as_json=True))
    return dict(client.get_server_metadata(as_json=True))


def test_server_live_and_ready(triton: Any) -> None:
    _, client = triton
    assert client.is_server_live() is True
    assert client.is_server_ready() is True


def test_model_ready_true_false_and_not_found(triton: Any) -> None:
    module, client = triton
    assert client.is_model_ready("sk") is True
    assert client.is_model_ready("sk", "v2") is True
    assert client.is_model_ready("xgb") is True
    assert client.is_model_ready("broken") is False  # its version FAILED: no model file
    # Unknown: 404 over REST (tritonclient.http reads any non-200 as False), NOT_FOUND over
    # gRPC, as KServe answers both (issue 16: the transports agree).
    if module is thttp:
        assert client.is_model_ready("no_such_model") is False
        assert client.is_model_ready("sk", "v9") is False
        return
    with pytest.raises(InferenceServerException) as unknown:
        client.is_model_ready("no_such_model")
    assert unknown.value.status() == "StatusCode.NOT_FOUND"
    assert unknown.value.message() == "Model with name no_such_model does not exist."
    with pytest.raises(InferenceServerException) as version:
        client.is_model_ready("sk", "v9")
    assert version.value.message() == "Request for unknown model: 'sk' version v9 is not found"


def test_server_metadata(triton: Any) -> None:
    module, client = triton
    meta = metadata(module, client)
    assert meta["name"] == "mlemu"
    assert meta["version"]
    assert "binary_tensor_data" in meta["extensions"]


def test_model_metadata_from_the_models(triton: Any) -> None:
    module, client = triton
    sk = metadata(module, client, "sk")
    assert sk["name"] == "sk"
    assert sorted(sk["versions"]) == ["v1", "v2"]
    assert sk.get("platform", "") == ""  # KServe's "" (proto3 JSON leaves an empty string out)
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in sk["inputs"]] == [
        ("input-0", "FP64", [-1, 4])]
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in sk["outputs"]] == [
        ("output-0", "INT64", [-1])]
    xgb = metadata(module, client, "xgb", "v1")
    assert xgb.get("platform", "") == ""
    assert [int(d) for d in xgb["inputs"][0]["shape"]] == [-1, 3]
    assert xgb["inputs"][0]["datatype"] == xgb["outputs"][0]["datatype"] == "FP32"
    with pytest.raises(InferenceServerException) as unknown:
        metadata(module, client, "no_such_model")
    assert unknown.value.message() == "Model with name no_such_model does not exist."


CASES = [
    # (model, version, model dir, rows, input datatype, numpy dtype, output datatype)
    ("sk", "", "sk_v1", SK_ROWS, "FP64", np.float64, "INT64"),
    ("sk", "v1", "sk_v1", SK_ROWS, "FP32", np.float32, "INT64"),
    ("sk", "v2", "sk_v2", [[1, -2, 3, 0], [0, 0, -1, 2]], "INT64", np.int64, "INT64"),
    ("text", "", "text", TEXTS, "BYTES", np.object_, "BYTES"),
    ("xgb", "", "xgb", XGB_ROWS, "FP32", np.float32, "FP32"),
    ("xgb", "v1", "xgb", XGB_ROWS, "FP64", np.float64, "FP32"),
]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}{c[1]}-{c[4]}" for c in CASES])
def test_infer_equals_in_process_predictions(triton: Any, models: Any, case: Any,
                                             binary: bool) -> None:
    module, client = triton
    root, _ = models
    model, version, directory, rows, datatype, dtype, out_type = case
    if dtype is np.object_:
        array = np.array([r.encode() for r in rows], dtype=np.object_)
    else:
        array = np.array(rows, dtype=dtype)
    result = client.infer(model, [infer_input(module, "x", array, datatype, binary)],
                          model_version=version, request_id="req-7",
                          outputs=[requested(module, "output-0", binary)])
    expected = in_process(root / directory, rows if dtype is not np.object_ else TEXTS)
    got = result.as_numpy("output-0")
    out = result.get_output("output-0")
    assert (out["datatype"] if module is thttp else out.datatype) == out_type
    if out_type == "BYTES":
        assert [v.decode() if isinstance(v, bytes) else v for v in got] == expected
    else:
        np.testing.assert_array_equal(got, np.asarray(expected, dtype=got.dtype))
    response = result.get_response()
    assert (response["id"] if module is thttp else response.id) == "req-7"
    assert (response["model_version"] if module is thttp else response.model_version) == (
        version or "v1")


def test_infer_without_outputs_returns_all(triton: Any, models: Any) -> None:
    module, client = triton
    array = np.array(XGB_ROWS, dtype=np.float32)
    result = client.infer("xgb", [infer_input(module, "input-0", array, "FP32", True)])
    np.testing.assert_array_equal(
        result.as_numpy("output-0"),
        np.asarray(in_process(models[0] / "xgb", XGB_ROWS), dtype=np.float32))


def test_request_parameters_reach_a_custom_predictor(triton: Any) -> None:
    module, client = triton
    array = np.array([[1.0, 2.0], [3.0, 4.0]])
    result = client.infer("echo", [infer_input(module, "x", array, "FP64", True)],
                          parameters={"scale": 10})
    np.testing.assert_array_equal(result.as_numpy("output-0"), [30.0, 70.0])


def test_errors_raise_with_the_servers_message(triton: Any, server: LiveServer) -> None:
    module, client = triton
    wrong = np.array([[1.0, 2.0]], dtype=np.float64)  # sk wants 4 features
    body = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP64", "data": [1.0, 2.0]}]}
    http_error = requests.post(f"{server.url}/v2/models/sk/infer", json=body, timeout=10)
    assert http_error.status_code == 400
    message = http_error.json()["error"]
    assert message.startswith("Prediction failed: Exception during sklearn prediction")
    with pytest.raises(InferenceServerException) as caught:
        client.infer("sk", [infer_input(module, "x", wrong, "FP64", False)])
    assert caught.value.message() == message
    with pytest.raises(InferenceServerException) as caught:
        client.infer("no_such_model", [infer_input(module, "x", wrong, "FP64", True)])
    assert caught.value.message() == requests.post(
        f"{server.url}/v2/models/no_such_model/infer", json=body, timeout=10).json()["error"]
    with pytest.raises(InferenceServerException, match="unknown output name"):
        client.infer("xgb", [infer_input(module, "x", np.zeros((1, 3), np.float32), "FP32", True)],
                     outputs=[requested(module, "nope", True)])


def test_http_compressed_request_and_response(server: LiveServer, models: Any) -> None:
    client = thttp.InferenceServerClient(server.url.removeprefix("http://"))
    array = np.array(SK_ROWS, dtype=np.float64)
    expected = in_process(models[0] / "sk_v1", SK_ROWS)
    for algorithm in ("gzip", "deflate"):
        result = client.infer("sk", [infer_input(thttp, "x", array, "FP64", True)],
                              request_compression_algorithm=algorithm,
                              response_compression_algorithm=algorithm)
        assert result.as_numpy("output-0").tolist() == expected


def test_grpc_typed_contents_and_messages_over_4_mib(server: LiveServer, models: Any) -> None:
    assert server.grpc_target
    limit = 256 * 1024 * 1024
    with grpc.insecure_channel(server.grpc_target, options=[
            ("grpc.max_send_message_length", limit),
            ("grpc.max_receive_message_length", limit)]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="sk", id="typed")
        tensor = request.inputs.add(name="x", datatype="FP64", shape=[3, 4])
        tensor.contents.fp64_contents.extend(np.asarray(SK_ROWS).reshape(-1).tolist())
        response = stub.ModelInfer(request, timeout=30)
        assert response.id == "typed"
        assert np.frombuffer(response.raw_output_contents[0], "<i8").tolist() == in_process(
            models[0] / "sk_v1", SK_ROWS)
        rows = np.random.default_rng(3).normal(size=(200_000, 4))  # 6.4 MB of FP64
        big = service_pb2.ModelInferRequest(model_name="sk")
        big.inputs.add(name="x", datatype="FP64", shape=list(rows.shape))
        big.raw_input_contents.append(rows.astype("<f8").tobytes())
        assert big.ByteSize() > 4 * 1024 * 1024
        answer = stub.ModelInfer(big, timeout=60)
        got = np.frombuffer(answer.raw_output_contents[0], "<i8")
        assert got.shape == (200_000,)
        assert got[:50].tolist() == in_process(models[0] / "sk_v1", rows[:50].tolist())


def test_v2_rest_server_and_model_not_ready(server: LiveServer) -> None:
    assert requests.get(f"{server.url}/v2/health/live", timeout=5).json() == {"live": True}
    ready = requests.get(f"{server.url}/v2/health/ready", timeout=5)
    assert (ready.status_code, ready.json()) == (200, {"ready": True})
    model = requests.get(f"{server.url}/v2/models/sk/versions/v2/ready", timeout=5)
    assert (model.status_code, model.json()) == (200, {"name": "sk", "ready": True})
    unknown = requests.get(f"{server.url}/v2/models/no_such_model/ready", timeout=5)
    assert unknown.status_code == 404
    assert unknown.headers["Content-Type"] == "application/json"
    assert unknown.json() == {"error": "Model with name no_such_model does not exist."}

    broken = requests.get(f"{server.url}/v2/models/broken/ready", timeout=5)
    assert (broken.status_code, broken.json()) == (503, {"name": "broken", "ready": False})


def tf_reference(model_dir: Any, inputs: dict[str, np.ndarray],
                 signature_name: str | None = None) -> dict[str, np.ndarray]:
    """The TensorFlow predictor's own answer in the test process."""
    import predictors

    predictor, _ = predictors.load(str(model_dir), "TENSORFLOW")
    return dict(predictor.predict_tensors(inputs, signature_name=signature_name))


def test_tensorflow_model_metadata_from_its_signature(triton: Any) -> None:
    module, client = triton
    meta = metadata(module, client, "tf2")
    assert meta["platform"] == "tensorflow_savedmodel"
    specs = {t["name"]: (t["datatype"], [int(d) for d in t["shape"]]) for t in meta["inputs"]}
    assert specs == {"a": ("FP32", [-1, 2]), "b": ("FP32", [-1])}
    outputs = {t["name"]: (t["datatype"], [int(d) for d in t["shape"]]) for t in meta["outputs"]}
    assert outputs == {"total": ("FP32", [-1]), "scaled": ("FP32", [-1, 2])}


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize(("datatype", "dtype"), [("FP32", np.float32), ("FP64", np.float64),
                                                 ("INT64", np.int64)])
def test_tensorflow_infer_equals_in_process(triton: Any, models: Any, binary: bool, datatype: str,
                                            dtype: Any) -> None:
    module, client = triton
    a = np.array([[1, 2], [3, -4], [0, 5]], dtype=dtype)
    b = np.array([2, -1, 3], dtype=dtype)
    result = client.infer("tf2", [infer_input(module, "a", a, datatype, binary),
                                  infer_input(module, "b", b, datatype, binary)],
                          outputs=[requested(module, "scaled", binary),
                                   requested(module, "total", binary)])
    expected = tf_reference(models[0] / "tf2", {"a": a.astype(np.float32), "b": b.astype(np.float32)})
    for name in ("scaled", "total"):
        got = result.as_numpy(name)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, expected[name])
    response = result.get_response()
    names = [o["name"] for o in response["outputs"]] if module is thttp else [
        o.name for o in response.outputs]
    assert names == ["scaled", "total"]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_tensorflow_bytes_signature_by_name(triton: Any, models: Any, binary: bool) -> None:
    module, client = triton
    texts = np.array([b"hello", "h\u00e9".encode(), b""], dtype=np.object_)
    result = client.infer("tf2", [infer_input(module, "text_bytes", texts, "BYTES", binary)],
                          parameters={"signature_name": "text"},
                          outputs=[requested(module, n, binary) for n in ("upper", "length")])
    expected = tf_reference(models[0] / "tf2", {"text_bytes": texts}, "text")
    upper = [v if isinstance(v, bytes) else v.encode() for v in result.as_numpy("upper")]
    assert upper == list(expected["upper"])
    np.testing.assert_array_equal(result.as_numpy("length"), expected["length"])
    assert result.as_numpy("length").dtype == np.int32


def test_keras_export_over_v2(triton: Any, models: Any) -> None:
    module, client = triton
    meta = metadata(module, client, "keras")
    [spec] = meta["inputs"]
    rows = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], dtype=np.float32)
    result = client.infer("keras", [infer_input(module, spec["name"], rows, "FP32", True)])
    expected = tf_reference(models[0] / "keras", {spec["name"]: rows})
    [out] = meta["outputs"]
    np.testing.assert_allclose(result.as_numpy(out["name"]), expected[out["name"]], rtol=0, atol=0)


def test_grps_gtensors_on_a_tensorflow_model(server: LiveServer, models: Any) -> None:
    body = {"model": "tf2", "gtensors": {"tensors": [
        {"name": "a", "dtype": "DT_FLOAT32", "shape": [2, 2], "flat_float32": [1, 2, 3, 4]},
        {"name": "b", "dtype": "DT_FLOAT32", "shape": [2], "flat_float32": [10, 20]}]}}
    answer = requests.post(f"{server.url}/grps/v1/infer/predict", json=body, timeout=30).json()
    assert answer["status"]["status"] == "SUCCESS", answer
    tensors = {t["name"]: t for t in answer["gtensors"]["tensors"]}
    expected = tf_reference(models[0] / "tf2", {"a": np.array([[1, 2], [3, 4]], np.float32),
                                                  "b": np.array([10, 20], np.float32)})
    assert tensors["total"]["flat_float32"] == expected["total"].tolist()
    assert tensors["scaled"]["shape"] == [2, 2]


def test_grpc_serves_models_created_through_the_http_api(server: LiveServer, models: Any) -> None:
    """gunicorn and the gRPC server share one registry: a version created over REST is served
    over gRPC as soon as it is READY."""
    import time

    base = f"{server.url}/v1/projects/mlemu/models"
    assert requests.post(base, json={"name": "late"}, timeout=10).status_code == 200
    created = requests.post(f"{base}/late/versions", timeout=10, json={
        "name": "v1", "deploymentUri": str(models[0] / "sk_v1"), "framework": "SCIKIT_LEARN"})
    assert created.status_code == 200, created.text
    deadline = time.monotonic() + 60
    while requests.get(f"{base}/late/versions/v1", timeout=10).json().get("state") != "READY":
        assert time.monotonic() < deadline, "version never became READY"
        time.sleep(0.1)
    assert server.grpc_target
    client = tgrpc.InferenceServerClient(server.grpc_target)
    assert client.is_model_ready("late") is True
    result = client.infer("late", [infer_input(tgrpc, "x", np.array(SK_ROWS), "FP64", True)])
    assert result.as_numpy("output-0").tolist() == in_process(models[0] / "sk_v1", SK_ROWS)
