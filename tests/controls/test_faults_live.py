"""Fault rules end to end on a live 2-worker server with its gRPC process: Google's own retry
logic, every protocol's error shape, counts shared by all processes, seeded draws."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import requests
from googleapiclient.errors import HttpError

from controls.rules import parse_rule
from protocols.proto_modules import grpc_predict_v2_pb2 as pb
from protocols.proto_modules import grpc_predict_v2_pb2_grpc, grps_pb2, grps_pb2_grpc
from tests.conftest import LiveServer, free_port, start_server, stop_server
from tests.kit import modelkit
from tests.kit.mlclient import error_of, ml_client

pytestmark = pytest.mark.slow
ROWS = [[0.5, -1.0, 2.0, 0.1], [-2.0, 0.3, -0.7, 1.5]]
NAME = "projects/mlemu/models/iris"
QUOTA = {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded for predictions."}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("faults")
    modelkit.sklearn_model(root / "iris")
    config = modelkit.bootstrap_file(root / "bootstrap.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(root / "iris")}}}}, project="mlemu")
    live = start_server(root / "state", config, workers=2, grpc_port=free_port())
    yield live
    stop_server(live.proc)


@pytest.fixture(autouse=True)
def clean(server: LiveServer) -> Iterator[None]:
    requests.post(server.url + "/_mlemu/reset", json={}, timeout=30).raise_for_status()
    yield


def add_rule(server: LiveServer, rule: dict[str, Any]) -> dict[str, Any]:
    answer = requests.post(server.url + "/_mlemu/faults", json=rule, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def journal(server: LiveServer, **filters: str) -> list[dict[str, Any]]:
    answer = requests.get(server.url + "/_mlemu/requests", params=filters, timeout=30)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["requests"])


def hits(server: LiveServer) -> list[int]:
    return [rule["hits"] for rule in requests.get(server.url + "/_mlemu/faults",
                                                   timeout=30).json()["faults"]]


def test_googleapiclient_retries_a_quota_error_and_the_journal_shows_every_call(
        server: LiveServer) -> None:
    add_rule(server, {"match": {"protocol": "aiplatform", "method": "predict", "project": "mlemu",
                                "model": "iris"}, "error": QUOTA, "times": 2})
    ml = ml_client(server.url)
    answer = ml.projects().predict(name=NAME, body={"instances": ROWS}).execute(num_retries=3)
    assert len(answer["predictions"]) == 2
    calls = journal(server, method="predict", model="iris")
    assert [c["status"] for c in calls] == [429, 429, 200]
    assert {(c["protocol"], c["project"], c["version"], c["instanceCount"]) for c in calls[-1:]} \
        == {("aiplatform", "mlemu", "v1", 2)}
    assert hits(server) == [2]


def test_without_retries_the_client_sees_googles_quota_error(server: LiveServer) -> None:
    add_rule(server, {"match": {"method": "predict"}, "error": QUOTA, "times": 1})
    ml = ml_client(server.url)
    with pytest.raises(HttpError) as caught:
        ml.projects().predict(name=NAME, body={"instances": ROWS}).execute()
    assert caught.value.resp.status == 429
    error = error_of(caught.value)
    assert (error["status"], error["message"]) == ("RESOURCE_EXHAUSTED", QUOTA["message"])
    types = [d["@type"] for d in error["details"]]
    assert "type.googleapis.com/google.rpc.QuotaFailure" in types
    assert "type.googleapis.com/google.rpc.ErrorInfo" in types
    assert ml.projects().predict(name=NAME, body={"instances": ROWS}).execute()["predictions"]


def _v2_infer(channel: grpc.Channel) -> Any:
    stub = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(channel)
    tensor = pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP64", shape=[2, 4],
        contents=pb.InferTensorContents(fp64_contents=[x for row in ROWS for x in row]))
    return stub.ModelInfer(pb.ModelInferRequest(model_name="iris", inputs=[tensor]), timeout=30)


def _grps_predict(channel: grpc.Channel) -> Any:
    message = grps_pb2.GrpsMessage(model="iris")
    message.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT64, shape=[2, 4],
                                 flat_float64=[x for row in ROWS for x in row])
    return grps_pb2_grpc.GrpsServiceStub(channel).Predict(message, timeout=30)


def test_every_protocol_answers_a_fault_in_its_own_shape(server: LiveServer) -> None:
    add_rule(server, {"match": {"model": "iris"}, "error": QUOTA})
    url = server.url
    tfs = requests.post(f"{url}/v1/models/iris:predict", json={"instances": ROWS}, timeout=30)
    assert (tfs.status_code, tfs.json()) == (429, {"error": QUOTA["message"]})
    v2_body = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [2, 4],
                           "data": [x for row in ROWS for x in row]}]}
    v2 = requests.post(f"{url}/v2/models/iris/infer", json=v2_body, timeout=30)
    assert (v2.status_code, v2.json()) == (429, {"error": QUOTA["message"]})
    grps_http = requests.post(f"{url}/grps/v1/infer/predict?model=iris", json={"ndarray": ROWS},
                              timeout=30)
    assert grps_http.status_code == 429
    assert grps_http.json()["status"]["code"] == 429
    assert grps_http.json()["status"]["msg"] == QUOTA["message"]
    with grpc.insecure_channel(server.grpc_target or "") as channel:
        with pytest.raises(grpc.RpcError) as caught:
            _v2_infer(channel)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert caught.value.details() == QUOTA["message"]
        assert _grps_predict(channel).status.code == 429
    seen = {(c["protocol"], c["method"], c["transport"]) for c in journal(server, model="iris")}
    assert seen == {("tfserving", "predict", "http"), ("v2", "infer", "http"),
                    ("grps", "predict", "http"), ("v2", "infer", "grpc"),
                    ("grps", "predict", "grpc")}
    requests.delete(url + "/_mlemu/faults", timeout=30).raise_for_status()
    with grpc.insecure_channel(server.grpc_target or "") as channel:
        assert _v2_infer(channel).outputs
    assert requests.post(f"{url}/v1/models/iris:predict", json={"instances": ROWS},
                         timeout=30).status_code == 200


def test_a_count_limit_holds_across_worker_processes(server: LiveServer) -> None:
    add_rule(server, {"match": {"protocol": "tfserving"}, "error": {"status": "UNAVAILABLE"},
                      "times": 5})
    codes = []
    for _ in range(16):  # a new connection each time: both workers serve some
        with requests.Session() as session:
            codes.append(session.post(f"{server.url}/v1/models/iris:predict",
                                      json={"instances": ROWS}, timeout=30).status_code)
    assert codes == [503] * 5 + [200] * 11
    assert [c["status"] for c in journal(server, protocol="tfserving")] == codes
    assert hits(server) == [5]


def test_a_seeded_probability_gives_the_same_sequence_in_every_process(
        server: LiveServer) -> None:
    rule = {"match": {"protocol": "v2", "method": "infer"}, "error": {"status": "ABORTED"},
            "probability": 0.5, "seed": 7}
    added = add_rule(server, rule)
    expected = [409 if parse_rule(rule, added["id"]).fires(n) else 200 for n in range(1, 21)]
    v2_body = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 4], "data": ROWS[0]}]}
    codes = []
    for _ in range(20):
        with requests.Session() as session:
            codes.append(session.post(f"{server.url}/v2/models/iris/infer", json=v2_body,
                                      timeout=30).status_code)
    assert codes == expected and 0 < codes.count(409) < 20
    assert hits(server) == [codes.count(409)]


def test_management_methods_take_rules_by_method_id(server: LiveServer) -> None:
    add_rule(server, {"match": {"method": "models.get", "model": "iris"},
                      "error": {"status": "UNAVAILABLE", "message": "try later"}, "times": 1})
    ml = ml_client(server.url)
    model = ml.projects().models().get(name=NAME).execute(num_retries=2)
    assert model["name"] == NAME
    calls = journal(server, method="models.get")
    assert [c["status"] for c in calls] == [503, 200]
    assert ml.projects().models().list(parent="projects/mlemu").execute()["models"]


def test_a_delay_holds_the_answer_at_least_that_long(server: LiveServer) -> None:
    """A lower bound only (a sleep never ends early), whatever the machine's speed."""
    add_rule(server, {"match": {"protocol": "v2", "method": "infer"}, "delayMs": 300, "times": 1})
    v2_body = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 4], "data": ROWS[0]}]}
    for _ in range(2):
        assert requests.post(f"{server.url}/v2/models/iris/infer", json=v2_body,
                             timeout=30).status_code == 200
    first, second = journal(server, protocol="v2")
    assert first["latencyMs"] >= 300 and (first["status"], second["status"]) == (200, 200)
    assert hits(server) == [1]
