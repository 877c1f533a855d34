"""Fuzzing every surface (issue 17): ml v1 management, AI Platform :predict, TF Serving, V2 REST
and gRPC, grps HTTP and gRPC get generated requests (hypothesis, a fixed seed, a few hundred
examples per family) built from valid ones with parts replaced by odd JSON (lone surrogates, huge
numbers, deep nesting, wrong types), odd bytes and odd parameters. Every answer must be a 4xx or
a success, in the protocol's JSON shape, with no stack trace; the server is still healthy after."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.kit import modelkit

SEED = 1717
EXAMPLES = 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

ODD_STRINGS = st.sampled_from(["\ud800", "\udfff", "a\udbffb", "", " ", "\x00", "nl\n", "-",
                               "zz", "NaN", "projects/p/models/m", "../../etc", "9" * 400,
                               "\U0001F600", "(" * 300, "-" * 990 + "name=x"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                    ODD_STRINGS)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), ODD_STRINGS),
                                                 inner, max_size=4)), max_leaves=20)


def encode(value: Any) -> bytes:
    """JSON with lone surrogates kept as escapes (as a client could send them)."""
    return json.dumps(value, allow_nan=True).encode()


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def mutate(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """A valid body with one key's value replaced, a key added or dropped, or odd bytes."""
    keys = sorted(valid) or ["name"]
    replaced = st.tuples(st.sampled_from(keys), JSON).map(lambda kv: encode({**valid, kv[0]: kv[1]}))
    added = st.tuples(st.one_of(st.text(max_size=8), ODD_STRINGS), JSON).map(
        lambda kv: encode({**valid, kv[0]: kv[1]}))
    dropped = st.sampled_from(keys).map(lambda k: encode({x: v for x, v in valid.items() if x != k}))
    raw = st.one_of(st.binary(max_size=64), st.sampled_from(
        [b"{bad", b"", b"\xff\xfe", b"\xed\xa0\x80", deep(100_000), b'{"a": 1e999999}',
         b'{"instances": [' + b"9" * 5000 + b"]}", b"null", b"[]", b'"\\ud800"']))
    return st.one_of(replaced, added, dropped, JSON.map(encode), raw)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("fuzz")
    modelkit.sklearn_model(root / "iris")
    boot = modelkit.bootstrap_file(root / "boot.yaml", {"m": {"versions": {
        "v1": {"deploymentUri": str(root / "iris")}}}}, project="mlemu")
    flask_app = create_app(Settings(state_dir=root / "state", config_file=boot,
                                    max_message_bytes=1 << 20), warm=False)
    client = flask_app.test_client()
    client.get("/grps/v1/health/online")
    return flask_app


def check(answer: Any, where: str) -> None:
    body = answer.get_data()
    assert answer.status_code < 500, (where, answer.status_code, body[:300])
    assert b"Traceback" not in body and b"<html" not in body.lower(), (where, body[:300])
    if answer.mimetype == "application/json":
        json.loads(body)
    else:  # only grps's bin_data / streaming answers are not JSON
        assert answer.mimetype == "application/octet-stream", (where, answer.mimetype)


def healthy(client: Any) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    answer = client.post("/v1/projects/mlemu/models/m:predict", json={"instances": [[1, 2, 3, 4]]})
    assert answer.status_code == 200, answer.data


PREDICT = {"instances": [[1.0, 2.0, 0.5, -1.0]]}
V2 = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
GRPS = {"gtensors": {"tensors": [{"name": "x", "dtype": "DT_FLOAT32", "shape": [1, 4],
                                  "flat_float32": [1, 2, 3, 4]}]}}
MANAGEMENT = [
    ("POST", "/v1/projects/mlemu/models", {"name": "fz", "description": "d", "labels": {"a": "b"}}),
    ("PATCH", "/v1/projects/mlemu/models/m?updateMask=description,labels", {"description": "x"}),
    ("POST", "/v1/projects/mlemu/models/m/versions", {"name": "v9", "deploymentUri": "/nowhere"}),
    ("POST", "/v1/projects/mlemu/models/m:setIamPolicy", {"policy": {"bindings": []}}),
    ("POST", "/v1/projects/mlemu/models/m/versions/v1:setDefault", {}),
]
PREDICTS = [
    ("/v1/projects/mlemu/models/m:predict", PREDICT, "application/json"),
    ("/v1/projects/mlemu/models/m/versions/v1:predict", PREDICT, "application/json"),
    ("/v1/models/m:predict", PREDICT, "application/json"),
    ("/v1/models/m:classify", {"examples": [{"x": 1}]}, "application/json"),
    ("/v2/models/m/infer", V2, "application/json"),
    ("/grps/v1/infer/predict?model=m", GRPS, "application/json"),
]


@seed(SEED)
@FUZZ
@given(data=st.data())
def test_management_routes(app, data):
    client = app.test_client()
    method, path, valid = data.draw(st.sampled_from(MANAGEMENT))
    body = data.draw(mutate(valid))
    check(client.open(path, method=method, data=body, headers={"Content-Type": "application/json"}),
          path)


@seed(SEED)
@FUZZ
@given(data=st.data())
def test_prediction_routes(app, data):
    client = app.test_client()
    path, valid, content_type = data.draw(st.sampled_from(PREDICTS))
    body = data.draw(mutate(valid))
    headers = {"Content-Type": content_type}
    if data.draw(st.booleans()) and path.startswith("/v2/"):
        headers["Inference-Header-Content-Length"] = str(data.draw(st.integers(-5, len(body) + 5)))
    check(client.post(path, data=body, headers=headers), path)


QUERIES = st.one_of(st.text(max_size=30), ODD_STRINGS, st.sampled_from(
    ["NOT " * 100 + "name=x", "labels.a=b AND (state=READY OR -name:x)", "name=\"unterminated"]))


@seed(SEED)
@FUZZ
@given(data=st.data())
def test_paths_and_query_parameters(app, data):
    client = app.test_client()
    template = data.draw(st.sampled_from([
        "/v1/projects/mlemu/models?filter={}", "/v1/projects/mlemu/operations?pageToken={}",
        "/v1/projects/mlemu/models?pageSize={}", "/v1/projects/mlemu/models/{}",
        "/v1/projects/mlemu/models/m/versions?filter={}", "/v2/models/{}/ready",
        "/v1/models/{}", "/v1/projects/mlemu/models?fields={}", "/v2/models/{}/infer",
        "/grps/v1/infer/predict?model={}"]))
    from urllib.parse import quote

    value = data.draw(QUERIES)
    path = template.format(quote(value.encode("utf-8", "surrogatepass"), safe=""))
    method = "POST" if path.endswith(("infer", "predict")) or "predict?" in path else "GET"
    check(client.open(path, method=method, data=b"{}",
                      headers={"Content-Type": "application/json"}), path)


@pytest.fixture(scope="module")
def grpc_channel(app):
    from grpcserve.server import build_server

    server, port = build_server(app.extensions["mlemu"], port=0)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield channel
    channel.close()
    server.stop(None)


def v2_request(data: Any) -> Any:
    from protocols.proto_modules import grpc_predict_v2_pb2 as pb

    request = pb.ModelInferRequest(model_name=data.draw(st.sampled_from(["m", "", "ghost", "m\n"])),
                                   model_version=data.draw(st.sampled_from(["", "v1", "zz"])))
    for _ in range(data.draw(st.integers(0, 2))):
        tensor = request.inputs.add(
            name=data.draw(st.sampled_from(["x", "", "\U0001F600"])),
            datatype=data.draw(st.sampled_from(["FP32", "BYTES", "INT64", "FP16", "zz", ""])),
            shape=data.draw(st.lists(st.integers(-2, 2**62), max_size=3)))
        tensor.contents.fp32_contents.extend(data.draw(st.lists(st.floats(width=32), max_size=4)))
        tensor.contents.bytes_contents.extend(data.draw(st.lists(st.binary(max_size=4), max_size=2)))
    for _ in range(data.draw(st.integers(0, 2))):
        request.raw_input_contents.append(data.draw(st.binary(max_size=16)))
    return request


def grps_request(data: Any) -> Any:
    from protocols.proto_modules import grps_pb2

    request = grps_pb2.GrpsMessage(model=data.draw(st.sampled_from(["m", "", "ghost", "m-v1", "-"])))
    kind = data.draw(st.sampled_from(["gtensors", "str_data", "bin_data", "none"]))
    if kind == "gtensors":
        for _ in range(data.draw(st.integers(0, 2))):
            tensor = request.gtensors.tensors.add(
                name=data.draw(st.sampled_from(["x", ""])),
                dtype=data.draw(st.sampled_from(list(grps_pb2.DataType.values()))),
                shape=data.draw(st.lists(st.integers(0, 2**32 - 1), max_size=3)))
            tensor.flat_float32.extend(data.draw(st.lists(st.floats(width=32), max_size=4)))
    elif kind == "str_data":
        request.str_data = data.draw(st.text(max_size=10))
    elif kind == "bin_data":
        request.bin_data = data.draw(st.binary(max_size=10))
    return request


@seed(SEED)
@FUZZ
@given(data=st.data())
def test_grpc_services(grpc_channel, data):
    from protocols.proto_modules import grpc_predict_v2_pb2_grpc, grps_pb2_grpc

    if data.draw(st.booleans()):
        stub = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(grpc_channel)
        try:
            stub.ModelInfer(v2_request(data), timeout=30)
        except grpc.RpcError as exc:
            assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                                  grpc.StatusCode.FAILED_PRECONDITION,
                                  grpc.StatusCode.UNIMPLEMENTED), (exc.code(), exc.details())
            assert "Traceback" not in (exc.details() or "")
    else:
        stub = grps_pb2_grpc.GrpsServiceStub(grpc_channel)
        answer = stub.Predict(grps_request(data), timeout=30)
        assert answer.status.code < 500, answer.status


def test_still_healthy_after(app, grpc_channel):
    healthy(app.test_client())
    from protocols.proto_modules import grpc_predict_v2_pb2 as pb
    from protocols.proto_modules import grpc_predict_v2_pb2_grpc

    stub = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(grpc_channel)
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from tests.conftest import start_server, stop_server

    root = tmp_path_factory.mktemp("fuzz-live")
    modelkit.sklearn_model(root / "iris")
    boot = modelkit.bootstrap_file(root / "boot.yaml", {"m": {"versions": {
        "v1": {"deploymentUri": str(root / "iris")}}}}, project="mlemu")
    server = start_server(root / "state", boot, workers=1,
                          env={"MLEMU_HEADER_TIMEOUT": "2", "MLEMU_REQUEST_TIMEOUT": "3"})
    yield server
    stop_server(server.proc)


TOKENS = st.sampled_from([b"GET", b"POST", b"PUT", b"G\x00T", b"", b" ", b"HTTP/1.1", b"HTTP/9.9",
                          b"/v1/projects/mlemu/models", b"/v2/models//infer", b"/grps/v1/health/live",
                          b"/" + b"a" * 9000, b"*", b"http://x/y", b"\r\n", b"\n", b"%zz", b"?a=%ff"])
HEADERS = st.sampled_from([b"Host: x", b"Content-Length: 5", b"Content-Length: -1",
                           b"Content-Length: zz", b"Transfer-Encoding: chunked",
                           b"Transfer-Encoding: gzip", b"Expect: 100-continue", b"Bad Name: v",
                           b"X: " + b"v" * 9000, b"Content-Type: application/json", b":", b"\x00: x"])


@seed(SEED)
@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(line=st.lists(TOKENS, min_size=1, max_size=4), headers=st.lists(HEADERS, max_size=4),
       body=st.one_of(st.binary(max_size=20), st.sampled_from([b"zz\r\n{}\r\n0\r\n\r\n",
                                                               b"5\r\n{bad}\r\n0\r\n\r\n"])))
def test_raw_http_framing(live, line, headers, body):
    """Whatever bytes arrive, gunicorn and the worker answer JSON (or close an unfinished
    request at its deadline), never HTML or a 5xx other than 501 for an unknown coding."""
    import socket

    host, port = live.url.removeprefix("http://").split(":")
    raw = b" ".join(line) + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)  # no more bytes: an incomplete request ends here
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 "), received[:500]
        status = int(head[9:12])
        fields = dict(line.lower().split(b": ", 1) for line in head.split(b"\r\n")[1:])
        length = int(fields.get(b"content-length", b"0"))
        answer, received = rest[:length], rest[length:]
        assert status < 500 or status == 501, (head, answer)
        assert b"<html" not in answer.lower(), (head, answer)
        if length:
            assert fields.get(b"content-type") in (b"application/json",
                                                   b"application/octet-stream"), (head, answer)
            if fields[b"content-type"] == b"application/json":
                json.loads(answer)
