"""Tiny requests never cost large allocations, and odd input is 400, never 500 (issue 17, items 5
and 8): element counts are checked against the bytes present before anything is allocated,
impossible shapes and non-string datatypes are refused, grps dtypes and numbers are checked."""

import json
import struct
import tracemalloc

import pytest

from protocols.tensor_binary import from_binary
from protocols.tensors import check_shape
from tests.kit import modelkit

HUGE = 4611686018427387904


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("bounds")
    modelkit.sklearn_model(root / "iris")
    boot = modelkit.bootstrap_file(root / "boot.yaml", {"m": {"versions": {
        "v1": {"deploymentUri": str(root / "iris")}}}}, project="mlemu")
    client = create_app(Settings(state_dir=root / "state", config_file=boot), warm=False).test_client()
    client.get("/grps/v1/health/online")
    return client


def peak_allocation(call):
    tracemalloc.start()
    try:
        call()
    except Exception:  # only the memory it took matters here
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_a_bytes_shape_is_checked_against_the_binary_data_before_allocating():
    raw = struct.pack("<I", 1) + b"x"
    with pytest.raises(Exception, match="expected 50000000 BYTES elements"):
        from_binary("b", "BYTES", (50_000_000,), raw)
    peak = peak_allocation(lambda: from_binary("b", "BYTES", (50_000_000,), raw))
    assert peak < 10 * 1024 * 1024  # was ~400 MB (an object array of 50,000,000)


@pytest.mark.parametrize("shape", [[HUGE, 4], [0, HUGE], [2**40, 2**40]])
def test_impossible_shapes_are_refused(shape):
    with pytest.raises(Exception, match="is too large"):
        check_shape(shape, "input 'x'")


def v2(client, body, binary=b""):
    header = json.dumps(body).encode()
    headers = {"Content-Type": "application/octet-stream"}
    if binary:
        headers["Inference-Header-Content-Length"] = str(len(header))
    return client.post("/v2/models/m/infer", data=header + binary, headers=headers)


@pytest.mark.parametrize("tensor", [
    {"name": "x", "datatype": [], "shape": [1, 4], "data": [1, 2, 3, 4]},
    {"name": "x", "datatype": {}, "shape": [1, 4], "data": [1, 2, 3, 4]},
    {"name": "x", "datatype": "FP32", "shape": [HUGE, 4], "data": [1, 2, 3, 4]},
    {"name": "x", "datatype": "FP32", "shape": [0, HUGE], "data": []},
    {"name": "x", "datatype": "BYTES", "shape": [50_000_000], "parameters": {"binary_data_size": 5}},
])
def test_v2_rest_odd_tensors_are_400(client, tensor):
    binary = struct.pack("<I", 1) + b"x" if "parameters" in tensor else b""
    answer = v2(client, {"inputs": [tensor]}, binary)
    assert answer.status_code == 400, answer.data
    assert "error" in answer.get_json()


def grps(client, body):
    return client.post("/grps/v1/infer/predict?model=m", data=json.dumps(body),
                       headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("body", [
    {"gtensors": {"tensors": [{"name": "x", "dtype": -1, "shape": [1, 4], "flat_float32": [1, 2, 3, 4]}]}},
    {"gtensors": {"tensors": [{"name": "x", "dtype": float("inf"), "shape": [1, 4]}]}},
    {"gtensors": {"tensors": [{"name": "x", "dtype": "DT_FLOAT32", "shape": [HUGE, 4],
                               "flat_float32": [1, 2, 3, 4]}]}},
    {"ndarray": [[int("9" * 400), 1, 2, 3]]},
])
def test_grps_odd_inputs_are_400(client, body):
    answer = grps(client, body)
    assert answer.status_code == 400, answer.data
    assert answer.get_json()["status"]["status"] == "FAILURE"


def test_a_gzip_bomb_is_refused_by_its_inflation(client):
    import gzip

    bomb = gzip.compress(b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": ['
                         + b"0," * (4 << 20) + b"0]}]}")
    assert len(bomb) < 20_000  # 8 MiB of JSON
    answer = client.post("/v2/models/m/infer", data=bomb,
                         headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert answer.status_code == 400, answer.data
    assert "inflates past 100 times its size" in answer.get_json()["error"]
    ordinary = gzip.compress(json.dumps({"inputs": [{"name": "x", "datatype": "FP32",
                                                     "shape": [1, 4], "data": [1, 2, 3, 4]}]}).encode())
    answer = client.post("/v2/models/m/infer", data=ordinary,
                         headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert answer.status_code == 200, answer.data


def test_tf_serving_refuses_an_integer_too_long_for_a_double(client):
    answer = client.post("/v1/models/m:predict", data=b'{"instances": [' + b"9" * 5000 + b"]}",
                         headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.data
    assert answer.get_json() == {
        "error": "JSON Parse error: Number too big to be stored in double. at offset: 15"}
