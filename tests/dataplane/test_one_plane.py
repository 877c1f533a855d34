"""Every protocol reaches a model through the one data plane (dataplane/): for each of ml v1
`:predict`, TF Serving REST, V2 REST and gRPC and grps HTTP and gRPC, through that protocol's
own client, concurrent one-row requests to one version are merged by adaptive batching (the
batch metrics count the merged call) and answer exactly as the same requests sent one by one,
a prediction stamps the version's lastUseTime (read through the management API), and a version
with a requestLoggingConfig gets a request-log row for every request.

Each protocol has a model of its own (the same scikit-learn classifier), so each test starts
from a version no request has reached yet.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import numpy as np
import pytest
import requests
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp

from observability import request_log
from predictors.sklearn import SklearnPredictor
from protocols.proto_modules import grps_pb2, grps_pb2_grpc
from tests.dataplane import planekit
from tests.kit import modelkit

PROTOCOLS = ("aiplatform", "tfserving", "v2_rest", "v2_grpc", "grps_http", "grps_grpc")
#: Rows of binary fractions: exact in float32, so the request log shows them as sent.
ROWS = [[0.5, -1.25, 2.0, 0.75], [-2.5, 1.5, -0.25, 3.0], [1.0, 1.0, -1.0, -1.0],
        [3.5, -0.5, 0.25, -2.0]]
HOLDER = [0.0, 0.0, 0.0, 0.0]
LOGGING = {"samplingPercentage": 1.0, "bigqueryTableName": "p.logs.requests"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[planekit.Served, planekit.Gate]]:
    root = tmp_path_factory.mktemp("one-plane")
    modelkit.sklearn_model(root / "sk", "logreg", features=4)
    config = modelkit.bootstrap_file(root / "bootstrap.yaml", {
        f"iris_{name}": {"versions": {"v1": {"deploymentUri": str(root / "sk"),
                                             "framework": "SCIKIT_LEARN",
                                             "requestLoggingConfig": LOGGING}}}
        for name in PROTOCOLS}, project="mlemu")
    gate = planekit.Gate()
    with pytest.MonkeyPatch.context() as patch:
        # Before any model loads: batchers call the class's own predict.
        patch.setattr(SklearnPredictor, "predict", gate.wrap(SklearnPredictor.predict))
        with planekit.serve(root / "state", config) as live:
            yield live, gate


def _aiplatform(live: planekit.Served, model: str) -> Callable[[list[float]], Any]:
    url = f"{live.url}/v1/projects/mlemu/models/{model}/versions/v1:predict"
    return lambda row: _ok(requests.post(url, json={"instances": [row]}, timeout=60))["predictions"]


def _tfserving(live: planekit.Served, model: str) -> Callable[[list[float]], Any]:
    url = f"{live.url}/v1/models/{model}/versions/1:predict"
    return lambda row: _ok(requests.post(url, json={"instances": [row]}, timeout=60))["predictions"]


def _v2(module: Any, target: str, model: str) -> Callable[[list[float]], Any]:
    def send(row: list[float]) -> Any:
        client = module.InferenceServerClient(target)
        data = module.InferInput("x", [1, 4], "FP32")
        data.set_data_from_numpy(np.asarray([row], dtype=np.float32))
        result = client.infer(model, [data], model_version="v1",
                              outputs=[module.InferRequestedOutput("output-0")])
        return result.as_numpy("output-0").tolist()
    return send


def _gtensors(row: list[float]) -> dict[str, Any]:
    return {"tensors": [{"name": "x", "dtype": "DT_FLOAT32", "shape": [1, 4], "flat_float32": row}]}


def _grps_http(live: planekit.Served, model: str) -> Callable[[list[float]], Any]:
    url = f"{live.url}/grps/v1/infer/predict"

    def send(row: list[float]) -> Any:
        answer = _ok(requests.post(url, params={"model": f"{model}-v1"}, timeout=60,
                                   json={"gtensors": _gtensors(row)}))
        return [int(v) for v in answer["gtensors"]["tensors"][0]["flat_int64"]]  # proto3 JSON: text
    return send


def _grps_grpc(live: planekit.Served, model: str) -> Callable[[list[float]], Any]:
    def send(row: list[float]) -> Any:
        message = grps_pb2.GrpsMessage(model=f"{model}-v1")
        message.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT32, shape=[1, 4],
                                     flat_float32=row)
        with grpc.insecure_channel(live.grpc_target) as channel:
            answer = grps_pb2_grpc.GrpsServiceStub(channel).Predict(message, timeout=60)
        assert answer.status.code == 200, answer.status.msg
        return list(answer.gtensors.tensors[0].flat_int64)
    return send


def client_for(protocol: str, live: planekit.Served, model: str) -> Callable[[list[float]], Any]:
    host = live.url.removeprefix("http://")
    return {
        "aiplatform": lambda: _aiplatform(live, model),
        "tfserving": lambda: _tfserving(live, model),
        "v2_rest": lambda: _v2(thttp, host, model),
        "v2_grpc": lambda: _v2(tgrpc, live.grpc_target, model),
        "grps_http": lambda: _grps_http(live, model),
        "grps_grpc": lambda: _grps_grpc(live, model),
    }[protocol]()


def _ok(response: requests.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def last_use_time(live: planekit.Served, model: str) -> str | None:
    version = _ok(requests.get(f"{live.url}/v1/projects/mlemu/models/{model}/versions/v1",
                               timeout=60))
    return version.get("lastUseTime")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_batches_stamps_and_logs(served: Any, protocol: str) -> None:
    live, gate = served
    emu = live.emu
    model = f"iris_{protocol}"
    send = client_for(protocol, live, model)
    assert last_use_time(live, model) is None

    alone = [send(row) for row in ROWS]  # one at a time: nothing to merge with
    assert last_use_time(live, model) is not None
    assert planekit.merged_metrics(emu, model) == (0, 0)

    version = emu.store.get_version(f"projects/mlemu/models/{model}/versions/v1")
    predictor = emu.deployments.get(version)
    together = planekit.merged_round(emu, gate, predictor, send, HOLDER, ROWS)
    assert together == alone
    # The held request ran alone; the four queued behind it ran as one merged call.
    assert planekit.merged_metrics(emu, model) == (1, len(ROWS))

    emu.request_log.drain()
    rows = request_log.read(emu.store, [version.name], 0)
    assert len(rows) == 2 * len(ROWS) + 1
    assert {(r["model"], r["model_version"]) for r in rows} == {(model, "v1")}
    first = json.loads(rows[0]["raw_data"])
    assert first == {"instances": [ROWS[0]]}
    assert np.ravel(json.loads(rows[0]["raw_prediction"])["predictions"]).tolist() == \
        np.ravel(alone[0]).tolist()
