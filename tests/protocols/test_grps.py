"""grps against a live server: a gRPC client generated from protos/grps.proto, and plain HTTP.

Each transport runs the whole grps sequence: live -> online -> ready -> predict with each payload
kind -> streaming -> metadata -> offline -> not ready. The server starts offline, as grps does.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
import requests
import yaml

from protocols.proto_modules import grps_pb2, grps_pb2_grpc
from tests.conftest import LiveServer, stop_server
from tests.protocols.conftest import in_process, start_protocol_server

pytestmark = pytest.mark.slow

SK_ROWS = [[0.5, -1.0, 2.0, 0.1], [-1.5, 0.3, 0.0, 1.0], [2.0, 2.0, -2.0, 0.5]]
XGB_ROWS = [[0.5, -1.0, 2.0], [-1.5, 0.3, 1.0]]
OK = {"code": 200, "msg": "OK", "status": "SUCCESS"}


@pytest.fixture(scope="module")
def grps_server(models: Any) -> Iterator[LiveServer]:
    """Default model `echo` (a custom predictor), so requests without a model go there."""
    live = start_protocol_server(models, {"MLEMU_GRPS_MODEL": "echo"})
    yield live
    stop_server(live.proc)


@pytest.fixture(scope="module")
def stub(grps_server: LiveServer) -> Iterator[Any]:
    assert grps_server.grpc_target
    with grpc.insecure_channel(grps_server.grpc_target) as channel:
        yield grps_pb2_grpc.GrpsServiceStub(channel)


def call(server: LiveServer, route: str, body: Any = None, *, query: str = "",
         method: str = "post", raw: bytes | None = None,
         content_type: str | None = "application/json") -> requests.Response:
    headers = {"Content-Type": content_type} if content_type else {}
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    return requests.request(method, f"{server.url}/grps/v1/{route}{query}", data=data,
                            headers=headers, timeout=30)


def expect(response: requests.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"]["code"] == status
    assert body["status"]["status"] == ("SUCCESS" if status == 200 else "FAILURE")
    return dict(body)


def gtensor(name: str, dtype: str, rows: Any) -> dict[str, Any]:
    array = np.asarray(rows)
    field = {"DT_FLOAT64": "flat_float64", "DT_FLOAT32": "flat_float32",
             "DT_INT64": "flat_int64"}[dtype]
    values = array.reshape(-1).tolist()
    if dtype == "DT_INT64":
        values = [str(v) for v in values]  # proto3 JSON writes int64 as strings
    return {"name": name, "dtype": dtype, "shape": list(array.shape), field: values}


def test_http_whole_sequence(grps_server: LiveServer, models: Any) -> None:
    root = models[0]
    assert expect(call(grps_server, "health/live", method="get")) == {"status": OK}
    expect(call(grps_server, "health/ready", method="get"), 503)  # starts offline
    assert expect(call(grps_server, "health/online", method="get")) == {"status": OK}
    expect(call(grps_server, "health/ready", method="get"))

    # str_data, default model (MLEMU_GRPS_MODEL=echo)
    assert expect(call(grps_server, "infer/predict", {"str_data": "hello grps"}))["str_data"] == (
        "HELLO GRPS")
    # gtensors, model from the query
    answer = expect(call(grps_server, "infer/predict",
                         {"gtensors": {"tensors": [gtensor("x", "DT_FLOAT64", SK_ROWS)]}},
                         query="?model=sk-v1"))
    [out] = answer["gtensors"]["tensors"]
    assert (out["dtype"], out["shape"]) == ("DT_INT64", [3])
    assert [int(v) for v in out["flat_int64"]] == in_process(root / "sk_v1", SK_ROWS)
    # gtensors with an enum number and int64 strings; the body's model wins over the query's
    int_rows = [[1, -2, 3, 0], [0, 0, -1, 2]]
    answer = expect(call(grps_server, "infer/predict", {
        "model": "sk-v2", "gtensors": {"tensors": [{"name": "x", "dtype": 5, "shape": [2, 4],
                                                    "flat_int64": ["1", "-2", "3", "0", "0", "0",
                                                                   "-1", "2"]}]}},
        query="?model=xgb"))
    assert [int(v) for v in answer["gtensors"]["tensors"][0]["flat_int64"]] == in_process(
        root / "sk_v2", int_rows)
    # ndarray in, ndarray out
    answer = expect(call(grps_server, "infer/predict", {"ndarray": XGB_ROWS},
                         query="?model=xgb-v1&return-ndarray=true"))
    assert "gtensors" not in answer
    expected = np.asarray(in_process(root / "xgb", XGB_ROWS), dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(answer["ndarray"], dtype=np.float32), expected)
    # gmap (s_b base64 in JSON) to the custom predictor
    answer = expect(call(grps_server, "infer/predict", {"gmap": {
        "s_d": {"a": 1.5}, "s_i32": {"b": 3}, "s_s": {"c": "text"},
        "s_b": {"d": base64.b64encode(b"\x00\x01").decode()}}}))
    assert answer["gmap"] == {"s_d": {"a": 3.0}, "s_i32": {"b": 6}, "s_s": {"c": "text"},
                              "s_b": {"d": base64.b64encode(b"\x00\x01").decode()}}
    # bin_data: raw octet-stream both ways
    binary = call(grps_server, "infer/predict", raw=b"\x01\x02abc",
                  content_type="application/octet-stream")
    assert binary.status_code == 200
    assert binary.headers["Content-Type"] == "application/octet-stream"
    assert binary.content == b"cba\x02\x01"

    # streaming: chunked, one message per chunk; an iterator's items stream one by one
    with requests.post(f"{grps_server.url}/grps/v1/infer/predict?streaming=true",
                       data=json.dumps({"str_data": "stream: one two three"}),
                       headers={"Content-Type": "application/json"}, stream=True,
                       timeout=30) as streamed:
        assert streamed.status_code == 200
        assert streamed.headers.get("Transfer-Encoding") == "chunked"
        chunks = [json.loads(chunk) for chunk in streamed.raw.read_chunked() if chunk]
    assert [c["str_data"] for c in chunks] == ["one", "two", "three"]
    assert all(c["status"] == OK for c in chunks)
    with requests.post(f"{grps_server.url}/grps/v1/infer/predict?streaming=true&model=sk",
                       data=json.dumps({"gtensors": {"tensors": [
                           gtensor("x", "DT_FLOAT64", SK_ROWS)]}}),
                       headers={"Content-Type": "application/json"}, stream=True,
                       timeout=30) as streamed:
        [single] = [json.loads(chunk) for chunk in streamed.raw.read_chunked() if chunk]
    assert len(single["gtensors"]["tensors"][0]["flat_int64"]) == 3

    # metadata: YAML in str_data
    server_meta = yaml.safe_load(expect(call(grps_server, "metadata/server", method="get"))["str_data"])
    assert server_meta["server"]["name"] == "mlemu"
    assert {m["name"] for m in server_meta["models"]} >= {"sk", "xgb", "echo", "text"}
    model_meta = yaml.safe_load(expect(call(grps_server, "metadata/model",
                                            {"str_data": "xgb"}))["str_data"])
    assert (model_meta["name"], model_meta["version"], model_meta["platform"]) == (
        "xgb", "v1", "")
    assert model_meta["inputs"] == [{"name": "input-0", "datatype": "FP32", "shape": [-1, 3]}]
    assert yaml.safe_load(expect(call(grps_server, "metadata/model", {"str_data": "sk-v2"}))[
        "str_data"])["version"] == "v2"

    expect(call(grps_server, "health/offline", method="post", body={}))
    expect(call(grps_server, "health/ready", method="get"), 503)


def _ok(message: Any) -> Any:
    assert message.status.status == grps_pb2.Status.SUCCESS, message.status
    assert (message.status.code, message.status.msg) == (200, "OK")
    return message


def test_grpc_whole_sequence(stub: Any, grps_server: LiveServer, models: Any) -> None:
    root = models[0]
    empty = grps_pb2.GrpsMessage()
    _ok(stub.CheckLiveness(empty, timeout=10))
    stub.Offline(empty, timeout=10)
    not_ready = stub.CheckReadiness(empty, timeout=10)
    assert (not_ready.status.status, not_ready.status.code) == (grps_pb2.Status.FAILURE, 503)
    _ok(stub.Online(empty, timeout=10))
    _ok(stub.CheckReadiness(empty, timeout=10))
    # the online flag is shared with the HTTP workers
    expect(call(grps_server, "health/ready", method="get"))

    assert _ok(stub.Predict(grps_pb2.GrpsMessage(str_data="abc"), timeout=10)).str_data == "ABC"
    request = grps_pb2.GrpsMessage(model="sk-v1")
    request.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT64, shape=[3, 4],
                                 flat_float64=np.asarray(SK_ROWS).reshape(-1).tolist())
    answer = _ok(stub.Predict(request, timeout=10))
    assert list(answer.gtensors.tensors[0].flat_int64) == in_process(root / "sk_v1", SK_ROWS)
    request = grps_pb2.GrpsMessage(model="xgb")
    request.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT32, shape=[2, 3],
                                 flat_float32=np.asarray(XGB_ROWS).reshape(-1).tolist())
    out = _ok(stub.Predict(request, timeout=10)).gtensors.tensors[0]
    assert out.dtype == grps_pb2.DT_FLOAT32
    np.testing.assert_array_equal(np.asarray(out.flat_float32, dtype=np.float32),
                                  np.asarray(in_process(root / "xgb", XGB_ROWS), dtype=np.float32))
    request = grps_pb2.GrpsMessage(model="text-v1")
    request.gtensors.tensors.add(name="text", dtype=grps_pb2.DT_STRING, shape=[2],
                                 flat_string=["good great", "awful bad"])
    out = _ok(stub.Predict(request, timeout=10)).gtensors.tensors[0]
    assert (out.dtype, list(out.flat_string)) == (grps_pb2.DT_STRING, in_process(
        root / "text", ["good great", "awful bad"]))
    request = grps_pb2.GrpsMessage()
    request.gmap.s_i64["n"] = 2**40
    request.gmap.s_f["f"] = 0.25
    assert dict(_ok(stub.Predict(request, timeout=10)).gmap.s_i64) == {"n": 2**41}
    assert _ok(stub.Predict(grps_pb2.GrpsMessage(bin_data=b"xyz"), timeout=10)).bin_data == b"zyx"

    streamed = list(stub.PredictStreaming(grps_pb2.GrpsMessage(str_data="stream: a b c d"),
                                          timeout=10))
    assert [_ok(m).str_data for m in streamed] == ["a", "b", "c", "d"]

    meta = yaml.safe_load(_ok(stub.ServerMetadata(empty, timeout=10)).str_data)
    assert meta["server"]["online"] is True
    model = yaml.safe_load(_ok(stub.ModelMetadata(grps_pb2.GrpsMessage(str_data="sk"),
                                                  timeout=10)).str_data)
    assert (model["name"], model["framework"], model["versions"]) == ("sk", "SCIKIT_LEARN",
                                                                       ["v1", "v2"])
    _ok(stub.Offline(empty, timeout=10))
    assert stub.CheckReadiness(empty, timeout=10).status.status == grps_pb2.Status.FAILURE


JSON = "application/json"
GRPS_MALFORMED: dict[str, tuple[str, bytes, str | None, int, str]] = {
    # name: (query, body, content type, status, part of status.msg)
    "bad-json": ("", b'{"str_data": ', JSON, 400, "Invalid JSON"),
    "truncated-body": ("", b'{"gtensors": {"tensors": [{"name": "x", "dty', JSON, 400,
                       "Invalid JSON"),
    "not-an-object": ("", b'["x"]', JSON, 400, "JSON GrpsMessage object"),
    "empty-body": ("", b"", JSON, 400, "empty"),
    "no-data": ("", b'{"model": "echo"}', JSON, 400, "No data"),
    "wrong-content-type": ("", b'{"str_data": "x"}', "text/plain", 415, "Unsupported content type"),
    "content-type-with-charset": ("", b'{"str_data": "x"}', "application/json; charset=utf-8", 415,
                                  "Unsupported content type"),
    "no-content-type": ("", b'{"str_data": "x"}', None, 400, "No content type"),
    "shape-data-mismatch": ("?model=sk", json.dumps({"gtensors": {"tensors": [
        {"name": "x", "dtype": "DT_FLOAT64", "shape": [2, 4], "flat_float64": [1, 2, 3]}]}}).encode(),
        JSON, 400, "needs 8 elements, but data has 3"),
    "unknown-dtype": ("?model=sk", json.dumps({"gtensors": {"tensors": [
        {"dtype": "DT_FLOAT128", "shape": [1], "flat_float64": [1]}]}}).encode(), JSON, 400,
        "unknown dtype 'DT_FLOAT128'"),
    "invalid-dtype": ("?model=sk", json.dumps({"gtensors": {"tensors": [
        {"dtype": "DT_INVALID", "shape": [1], "flat_float64": [1]}]}}).encode(), JSON, 400,
        "unknown or missing dtype"),
    "int64-not-a-number": ("?model=sk", json.dumps({"gtensors": {"tensors": [
        {"dtype": "DT_INT64", "shape": [1], "flat_int64": ["abc"]}]}}).encode(), JSON, 400,
        "Invalid GrpsMessage JSON"),
    "ragged-ndarray": ("?model=xgb", b'{"ndarray": [[1, 2, 3], [4]]}', JSON, 400, "rectangular"),
    "bin-data-in-json": ("", b'{"bin_data": "AAEC"}', JSON, 400, "application/octet-stream"),
    "unknown-model": ("?model=no_such_model", b'{"str_data": "x"}', JSON, 404,
                      "Not found model: no_such_model"),
    "unknown-version": ("?model=sk-v9", b'{"str_data": "x"}', JSON, 404, "Not found model: sk-v9"),
    # The grps docs' own example names `flat_double`; GenericTensor's field is `flat_float64`.
    "unknown-field": ("?model=sk", json.dumps({"gtensors": {"tensors": [
        {"dtype": "DT_FLOAT64", "shape": [1, 4], "flat_double": [1, 2, 3, 4]}]}}).encode(), JSON,
        400, 'has no field named "flat_double" at "GrpsMessage.gtensors.tensors[0]"'),
    "wrong-feature-count": ("?model=sk", b'{"ndarray": [[1, 2]]}', JSON, 400, "Prediction failed"),
    "streaming-and-ndarray": ("?streaming=true&return-ndarray=true", b'{"str_data": "x"}', JSON,
                              400, "not supported at the same time"),
    "ndarray-of-a-string": ("?return-ndarray=true", b'{"str_data": "x"}', JSON, 400,
                            "return-ndarray needs a tensor"),
}


@pytest.mark.parametrize("case", list(GRPS_MALFORMED))
def test_malformed_http_requests_get_4xx_status(grps_server: LiveServer, case: str) -> None:
    query, body, content_type, status, message = GRPS_MALFORMED[case]
    answer = expect(call(grps_server, "infer/predict", raw=body, query=query,
                         content_type=content_type), status)
    assert message in answer["status"]["msg"]
    assert list(answer) == ["status"]
    assert call(grps_server, "infer/predict", {"str_data": "still"}).json()["str_data"] == "STILL"


def test_malformed_metadata_and_routes(grps_server: LiveServer) -> None:
    assert "No model name" in expect(call(grps_server, "metadata/model", {}), 400)["status"]["msg"]
    expect(call(grps_server, "metadata/model", raw=b"{nope"), 400)
    expect(call(grps_server, "metadata/model", {"str_data": "no_such_model"}), 404)
    expect(call(grps_server, "infer/unknown", {"str_data": "x"}), 404)
    expect(call(grps_server, "infer/predict", method="get"), 405)


def test_malformed_grpc_requests_report_failure_status(stub: Any, grps_server: LiveServer) -> None:
    mismatch = grps_pb2.GrpsMessage(model="sk")
    mismatch.gtensors.tensors.add(dtype=grps_pb2.DT_FLOAT64, shape=[2, 4], flat_float64=[1, 2])
    invalid = grps_pb2.GrpsMessage(model="sk")
    invalid.gtensors.tensors.add(dtype=grps_pb2.DT_INVALID, shape=[1])
    cases = [
        (mismatch, 400, "needs 8 elements"),
        (invalid, 400, "unknown or missing dtype"),
        (grps_pb2.GrpsMessage(model="echo"), 400, "No data"),
        (grps_pb2.GrpsMessage(model="no_such_model", str_data="x"), 404,
         "Not found model: no_such_model"),
    ]
    for request, code, message in cases:
        answer = stub.Predict(request, timeout=10)
        assert answer.status.status == grps_pb2.Status.FAILURE
        assert answer.status.code == code and message in answer.status.msg
        [streamed] = list(stub.PredictStreaming(request, timeout=10))
        assert (streamed.status.code, streamed.status.msg) == (code, answer.status.msg)
    missing = stub.ModelMetadata(grps_pb2.GrpsMessage(), timeout=10)
    assert (missing.status.status, missing.status.code) == (grps_pb2.Status.FAILURE, 400)
    assert _ok(stub.Predict(grps_pb2.GrpsMessage(str_data="ok"), timeout=10)).str_data == "OK"
    assert grps_server.proc.poll() is None
