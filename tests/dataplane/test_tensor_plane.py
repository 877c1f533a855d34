"""Named tensors through the one data plane: a TensorFlow signature served over V2 gRPC
(tritonclient) and TF Serving REST (requests) merges concurrent one-row requests into one
`predict_tensors` call, answers each exactly as when it ran alone, and logs each request with its
input and output tensors. A signature with an output that has no row per instance (`uneven`'s
`first`) cannot be cut back: its requests run again alone, with the right answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import requests
import tritonclient.grpc as tgrpc

from observability import request_log
from predictors.tensorflow import TensorFlowPredictor
from tests.dataplane import planekit
from tests.kit import modelkit

LOGGING = {"samplingPercentage": 1.0, "bigqueryTableName": "p.logs.requests"}
ROWS = [([0.5, 1.5], 2.0), ([-1.0, 0.25], -0.5), ([3.0, -2.0], 1.0), ([0.0, 4.5], 0.75)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[planekit.Served, planekit.Gate]]:
    from tests.kit import tfmodels

    root = tmp_path_factory.mktemp("tensor-plane")
    tfmodels.tf2_model(root / "tf2")
    version = {"deploymentUri": str(root / "tf2"), "framework": "TENSORFLOW",
               "requestLoggingConfig": LOGGING}
    config = modelkit.bootstrap_file(root / "bootstrap.yaml", {
        name: {"versions": {"v1": version}} for name in ("tf_v2", "tf_rest", "tf_uneven")},
        project="mlemu")
    gate = planekit.Gate()
    with pytest.MonkeyPatch.context() as patch:
        # Before the model loads: the loaded predictor's timed method wraps the class's.
        patch.setattr(TensorFlowPredictor, "predict_tensors",
                      gate.wrap(TensorFlowPredictor.predict_tensors))
        with planekit.serve(root / "state", config) as live:
            yield live, gate


def v2_client(live: planekit.Served, model: str, signature: str | None = None
              ) -> Callable[[Any], dict[str, list[Any]]]:
    def send(row: Any) -> dict[str, list[Any]]:
        a, b = row
        client = tgrpc.InferenceServerClient(live.grpc_target)
        inputs = [tgrpc.InferInput("a", [1, 2], "FP32"), tgrpc.InferInput("b", [1], "FP32")]
        inputs[0].set_data_from_numpy(np.asarray([a], np.float32))
        inputs[1].set_data_from_numpy(np.asarray([b], np.float32))
        if signature is not None:  # `uneven` takes x only
            inputs = [tgrpc.InferInput("x", [1], "FP32")]
            inputs[0].set_data_from_numpy(np.asarray([b], np.float32))
        result = client.infer(model, inputs, model_version="v1",
                              parameters={"signature_name": signature} if signature else None)
        return {o.name: result.as_numpy(o.name).tolist() for o in result.get_response().outputs}
    return send


def rest_client(live: planekit.Served, model: str) -> Callable[[Any], Any]:
    url = f"{live.url}/v1/models/{model}:predict"

    def send(row: Any) -> Any:
        a, b = row
        answer = requests.post(url, json={"instances": [{"a": a, "b": b}]}, timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()["predictions"]
    return send


def predictor_of(live: planekit.Served, model: str) -> Any:
    version = live.emu.store.get_version(f"projects/mlemu/models/{model}/versions/v1")
    return live.emu.deployments.get(version)


@pytest.mark.parametrize(("model", "client"), [("tf_v2", v2_client), ("tf_rest", rest_client)])
def test_tensor_requests_merge_and_answer_as_alone(served: Any, model: str, client: Any) -> None:
    live, gate = served
    send = client(live, model)
    alone = [send(row) for row in ROWS]
    together = planekit.merged_round(live.emu, gate, predictor_of(live, model), send,
                                     ([0.0, 0.0], 0.0), ROWS)
    assert together == alone
    assert planekit.merged_metrics(live.emu, model) == (1, len(ROWS))
    live.emu.request_log.drain()
    rows = request_log.read(live.emu.store, [f"projects/mlemu/models/{model}/versions/v1"], 0)
    assert len(rows) == 2 * len(ROWS) + 1
    first = json.loads(rows[0]["raw_data"])  # the tensors the model got, TF Serving's columns
    assert first["inputs"] == {"a": [ROWS[0][0]], "b": [ROWS[0][1]]}
    assert set(json.loads(rows[0]["raw_prediction"])["outputs"]) == {"total", "scaled"}


def test_outputs_without_a_row_per_instance_run_each_request_alone(served: Any) -> None:
    live, gate = served
    send = v2_client(live, "tf_uneven", signature="uneven")
    alone = [send(row) for row in ROWS]
    assert [answer["first"] for answer in alone] == [[row[1]] for row in ROWS]
    together = planekit.merged_round(live.emu, gate, predictor_of(live, "tf_uneven"), send,
                                     ([0.0, 0.0], 0.0), ROWS)
    assert together == alone
    assert planekit.merged_metrics(live.emu, "tf_uneven") == (1, len(ROWS))  # tried, not kept
    batcher = live.emu.deployments.batchers.existing(predictor_of(live, "tf_uneven"), "tensors")
    assert batcher is not None and batcher.merged_calls == 0
