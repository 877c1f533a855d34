"""Malformed V2 requests (REST and gRPC) get a 4xx in V2's error shape, and the server keeps serving."""

from __future__ import annotations

import gzip
import json
import struct
import time
from typing import Any

import grpc
import numpy as np
import pytest
import requests
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.conftest import LiveServer, stop_server
from tests.protocols.conftest import start_protocol_server

pytestmark = pytest.mark.slow

GOOD = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [1, 2, 3, 4]}]}


def _binary(header: dict[str, Any], binary: bytes) -> tuple[bytes, dict[str, str]]:
    text = json.dumps(header).encode()
    return text + binary, {"Inference-Header-Content-Length": str(len(text))}


def _tensor(datatype: str, shape: list[int], **extra: Any) -> dict[str, Any]:
    return {"inputs": [{"name": "x", "datatype": datatype, "shape": shape, **extra}]}


FOUR_FP64 = struct.pack("<4d", 1, 2, 3, 4)

REST_CASES: dict[str, tuple[bytes, dict[str, str], str]] = {
    # name: (body, headers, part of the error message)
    "bad-json": (b'{"inputs": [', {}, "Invalid JSON"),
    "not-an-object": (b"[1, 2]", {}, "JSON object"),
    "empty-body": (b"", {}, "empty"),
    "no-inputs": (b'{"outputs": []}', {}, "'inputs'"),
    "shape-data-mismatch": (json.dumps(_tensor("FP64", [2, 4], data=[1, 2, 3])).encode(), {},
                            "needs 8 elements, but data has 3"),
    "negative-shape": (json.dumps(_tensor("FP64", [-1, 4], data=[1, 2, 3, 4])).encode(), {},
                       "non-negative"),
    "unknown-datatype": (json.dumps(_tensor("FP128", [1, 4], data=[1, 2, 3, 4])).encode(), {},
                         "unknown datatype 'FP128'"),
    "string-in-fp32": (json.dumps(_tensor("FP32", [1, 1], data=["x"])).encode(), {},
                       "not a valid FP32"),
    "uint8-overflow": (json.dumps(_tensor("UINT8", [1, 1], data=[300])).encode(), {},
                       "does not fit UINT8"),
    "fp16-as-json": (json.dumps(_tensor("FP16", [1, 1], data=[1.0])).encode(), {},
                     "must be sent as binary"),
    "truncated-binary": (*_binary(_tensor("FP64", [1, 4], parameters={"binary_data_size": 32}),
                                  FOUR_FP64[:16]), "truncated"),
    "binary-size-wrong-for-shape": (*_binary(_tensor("FP64", [2, 4], parameters={
        "binary_data_size": 32}), FOUR_FP64), "needs 64 bytes"),
    "truncated-bytes-element": (*_binary(_tensor("BYTES", [1], parameters={"binary_data_size": 6}),
                                         struct.pack("<I", 9) + b"ab"), "declares 9 bytes"),
    "unclaimed-binary": (*_binary(GOOD, b"\x00" * 8), "no input claims"),
    "header-length-too-big": (json.dumps(GOOD).encode(),
                              {"Inference-Header-Content-Length": "100000"}, "body has"),
    "header-length-not-int": (json.dumps(GOOD).encode(),
                              {"Inference-Header-Content-Length": "ten"}, "must be an integer"),
    "outputs-not-a-list": (json.dumps({**GOOD, "outputs": "all"}).encode(), {}, "'outputs'"),
    "wrong-content-type-form": (b"x=1&y=2", {"Content-Type": "application/x-www-form-urlencoded"},
                                "Invalid JSON"),
    "bad-gzip": (b"not gzip at all", {"Content-Encoding": "gzip"}, "not valid gzip"),
    "unsupported-encoding": (json.dumps(GOOD).encode(), {"Content-Encoding": "br"},
                             "Unsupported Content-Encoding"),
    "gzip-bomb": (gzip.compress(b" " * (17 * 1024 * 1024)), {"Content-Encoding": "gzip"},
                  "exceeds the limit"),
}


@pytest.fixture(scope="module")
def small_limit_server(models: Any) -> Any:
    live = start_protocol_server(models, {"MLEMU_MAX_MESSAGE_BYTES": str(16 * 1024 * 1024)})
    yield live
    stop_server(live.proc)


def _still_serving(server: LiveServer) -> None:
    assert server.proc.poll() is None
    ok = requests.post(f"{server.url}/v2/models/sk/infer", json=GOOD, timeout=10)
    assert ok.status_code == 200, ok.text
    assert ok.json()["outputs"][0]["name"] == "output-0"


@pytest.mark.parametrize("case", list(REST_CASES))
def test_malformed_rest_requests_get_4xx_json_errors(small_limit_server: LiveServer,
                                                     case: str) -> None:
    body, headers, message = REST_CASES[case]
    response = requests.post(f"{small_limit_server.url}/v2/models/sk/infer", data=body,
                             headers=headers, timeout=30)
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["Content-Type"] == "application/json"
    assert list(response.json()) == ["error"]
    assert message in response.json()["error"]
    _still_serving(small_limit_server)


def test_body_read_whatever_the_content_type(small_limit_server: LiveServer) -> None:
    for content_type in ("text/plain", None):
        headers = {"Content-Type": content_type} if content_type else {}
        response = requests.post(f"{small_limit_server.url}/v2/models/sk/infer",
                                 data=json.dumps(GOOD), headers=headers, timeout=10)
        assert response.status_code == 200


def test_unknown_routes_and_methods_answer_v2_errors(small_limit_server: LiveServer) -> None:
    url = small_limit_server.url
    missing = requests.get(f"{url}/v2/models/sk/explain", timeout=5)
    assert missing.status_code == 404 and "error" in missing.json()
    wrong = requests.get(f"{url}/v2/models/sk/infer", timeout=5)
    assert wrong.status_code == 405 and "error" in wrong.json()
    _still_serving(small_limit_server)


def _request(datatype: str = "FP64", shape: tuple[int, ...] = (1, 4)) -> Any:
    request = service_pb2.ModelInferRequest(model_name="sk")
    request.inputs.add(name="x", datatype=datatype, shape=list(shape))
    return request


def _grpc_cases() -> dict[str, tuple[Any, grpc.StatusCode, str]]:
    unknown = _request("FP128")
    unknown.inputs[0].contents.fp64_contents.extend([1, 2, 3, 4])
    mismatch = _request()
    mismatch.inputs[0].contents.fp64_contents.extend([1, 2, 3])
    truncated = _request()
    truncated.raw_input_contents.append(FOUR_FP64[:20])
    too_many = _request()
    too_many.raw_input_contents.extend([FOUR_FP64, FOUR_FP64])
    fp16 = _request("FP16", (1, 1))
    negative = _request(shape=(-1, 4))
    no_model = _request()
    no_model.model_name = "no_such_model"
    no_model.raw_input_contents.append(FOUR_FP64)
    return {
        "unknown-datatype": (unknown, grpc.StatusCode.INVALID_ARGUMENT, "unknown datatype"),
        "shape-data-mismatch": (mismatch, grpc.StatusCode.INVALID_ARGUMENT, "needs 4 elements"),
        "truncated-raw": (truncated, grpc.StatusCode.INVALID_ARGUMENT, "needs 32 bytes"),
        "raw-count": (too_many, grpc.StatusCode.INVALID_ARGUMENT, "2 entries for 1 inputs"),
        "fp16-typed": (fp16, grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents"),
        "negative-shape": (negative, grpc.StatusCode.INVALID_ARGUMENT, "non-negative"),
        "unknown-model": (no_model, grpc.StatusCode.NOT_FOUND, "no_such_model"),
    }


@pytest.mark.parametrize("case", list(_grpc_cases()))
def test_malformed_grpc_requests_get_status_codes(small_limit_server: LiveServer, case: str) -> None:
    request, code, message = _grpc_cases()[case]
    assert small_limit_server.grpc_target
    with grpc.insecure_channel(small_limit_server.grpc_target) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request, timeout=10)
        assert caught.value.code() == code
        assert message in (caught.value.details() or "")
        good = _request()
        good.raw_input_contents.append(FOUR_FP64)
        answer = stub.ModelInfer(good, timeout=10)
        assert np.frombuffer(answer.raw_output_contents[0], "<i8").shape == (1,)
    _still_serving(small_limit_server)


GARBLED = b"\x0a\xff\xff\xff\xff\x0f"  # a length-delimited field 1 that runs past the end


def _grpc_requests_counted(server: LiveServer, method: str, code: str) -> float:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("mlemu_requests_total{") and 'transport="grpc"' in line \
                and f'method="{method}"' in line and f'code="{code}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_messages_that_do_not_parse_are_invalid_arguments(small_limit_server: LiveServer) -> None:
    """Bytes that are not the method's message: INVALID_ARGUMENT naming the message type (no
    Python class name), one short log line per call (no traceback), counted in /metrics."""
    assert small_limit_server.grpc_target
    calls = [("/inference.GRPCInferenceService/ModelInfer", "inference.ModelInferRequest", False),
             ("/inference.GRPCInferenceService/ModelReady", "inference.ModelReadyRequest", False),
             ("/grps.protos.v1.GrpsService/Predict", "grps.protos.v1.GrpsMessage", False),
             ("/grps.protos.v1.GrpsService/PredictStreaming", "grps.protos.v1.GrpsMessage", True)]
    log_before = small_limit_server.output()
    counted = _grpc_requests_counted(small_limit_server, "ModelInfer", "INVALID_ARGUMENT")
    rounds = 20
    with grpc.insecure_channel(small_limit_server.grpc_target) as channel:
        for path, message_type, streaming in calls:
            call = (channel.unary_stream if streaming else channel.unary_unary)(
                path, request_serializer=bytes, response_deserializer=bytes)
            for _ in range(rounds):
                with pytest.raises(grpc.RpcError) as caught:
                    answer = call(GARBLED, timeout=10)
                    if streaming:
                        list(answer)
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, path
                assert caught.value.details() == ("Failed to parse the request: it is not a "
                                                  f"valid {message_type} message.")
    _still_serving(small_limit_server)
    deadline = time.monotonic() + 30  # the gRPC process flushes its counts every second
    while _grpc_requests_counted(small_limit_server, "ModelInfer",
                                 "INVALID_ARGUMENT") - counted < rounds:
        assert time.monotonic() < deadline, "the refused calls were never counted"
        time.sleep(0.2)
    logged = small_limit_server.output()[len(log_before):]
    assert "Traceback" not in logged and "DecodeError" not in logged
    lines = [line for line in logged.splitlines() if "request is not a valid" in line]
    assert len(lines) == rounds * len(calls)
    assert len(logged) < 400 * rounds * len(calls)
