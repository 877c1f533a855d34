"""Where gRPC calls run (grpcserve/dispatch.py): brief calls on the event loop, the rest in the pool,
with the same answers and the same errors either way. A real grpc.aio server in process, real
models, real channels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from core.settings import Settings
from protocols.proto_modules import grpc_predict_v2_pb2 as pb
from protocols.proto_modules import grpc_predict_v2_pb2_grpc, grps_pb2, grps_pb2_grpc
from tests.kit import modelkit
from tests.kit.clocks import SHARED

ROW = [1.0, 2.0, 0.5, -1.0]

#: Custom predictors whose calls are slow two ways: computing (CPU) and waiting (no CPU). They
#: report what they do to the shared fake meter the dispatcher reads (tests/kit/clocks.py), so
#: every decision below is the same on any machine under any load.
SLOW_SOURCE = '''
import os
import time

from tests.kit.clocks import SHARED


class BusyPredictor:
    """Computes for 6 ms a call."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        SHARED.compute(0.006)
        return [sum(row) for row in instances]


class SleepyPredictor:
    """Waits 30 ms a call (as on a remote feature store), using no CPU meanwhile."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        SHARED.wait(0.03)
        return [sum(row) for row in instances]


class SpikyPredictor:
    """Brief, except that a row starting with 99 computes for 4.5 ms (over DEMOTE_FACTOR x 1 ms)
    without waiting."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        if instances[0][0] == 99:
            SHARED.compute(0.0045)
        return [sum(row) for row in instances]


class GatePredictor:
    """Waits until the file `open` exists in its model directory."""

    @classmethod
    def from_path(cls, model_dir):
        return cls(model_dir)

    def __init__(self, model_dir):
        self.gate = os.path.join(model_dir, "open")

    def predict(self, instances, **kwargs):
        deadline = time.monotonic() + 30
        while not os.path.exists(self.gate) and time.monotonic() < deadline:
            time.sleep(0.005)
        return [sum(row) for row in instances]
'''


def _emulator(root: Path, inline_ms: float | None = None) -> Any:
    from boot import build_emulator

    modelkit.sklearn_model(root / "sk", "logreg", features=4)
    package = modelkit.custom_package(root / "pkg", "slow_predictors", SLOW_SOURCE, kind="dir")
    modelkit.custom_model_dir(root / "custom")
    custom = {"deploymentUri": str(root / "custom"), "packageUris": [str(package)]}
    gate = modelkit.custom_model_dir(root / "gate")
    config = modelkit.bootstrap_file(root / "bootstrap.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": str(root / "sk"), "framework": "SCIKIT_LEARN"}}},
        "busy": {"versions": {"v1": {**custom, "predictionClass": "slow_predictors.BusyPredictor"}}},
        "sleepy": {"versions": {"v1": {**custom,
                                       "predictionClass": "slow_predictors.SleepyPredictor"}}},
        "spiky": {"versions": {"v1": {**custom, "predictionClass": "slow_predictors.SpikyPredictor"}}},
        "gate": {"versions": {"v1": {**custom, "deploymentUri": str(gate),
                                     "predictionClass": "slow_predictors.GatePredictor"}}},
    }, project="mlemu")
    extra = {} if inline_ms is None else {"grpc_inline_ms": inline_ms}
    return build_emulator(Settings(state_dir=root / "state", config_file=config, **extra))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, grpc.Channel, Path]]:
    from grpcserve.server import build_server

    root = tmp_path_factory.mktemp("dispatch")
    server, port = build_server(_emulator(root), port=0, meter=SHARED.meter())
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield server.dispatcher, channel, root
    server.stop(None)


def infer(channel: grpc.Channel, model: str, rows: list[list[float]]) -> Any:
    stub = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(channel)
    tensor = pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP64", shape=[len(rows), len(rows[0])],
        contents=pb.InferTensorContents(fp64_contents=[x for row in rows for x in row]))
    return stub.ModelInfer(pb.ModelInferRequest(model_name=model, inputs=[tensor]), timeout=30)


def values(answer: Any) -> list[Any]:
    """Output 0's values (raw_output_contents, as mlemu answers)."""
    dtype = {"FP64": "<f8", "INT64": "<i8"}[answer.outputs[0].datatype]
    return np.frombuffer(answer.raw_output_contents[0], dtype).tolist()


def counts(dispatcher: Any) -> tuple[int, int]:
    return dispatcher.inline_calls, dispatcher.pool_calls


def test_brief_calls_run_on_the_loop_with_the_same_answers(served: Any) -> None:
    dispatcher, channel, _ = served
    first = infer(channel, "sk", [ROW])  # unknown cost: in the pool
    inline, pool = counts(dispatcher)
    answers = [infer(channel, "sk", [ROW]) for _ in range(40)]
    assert all(answer == first for answer in answers)
    assert first.outputs[0].datatype == "INT64" and first.raw_output_contents
    # The real model's calls cost nothing on the fake meter: brief, all on the loop.
    assert counts(dispatcher) == (inline + 40, pool)


def test_grps_calls_are_dispatched_too(served: Any) -> None:
    dispatcher, channel, _ = served
    grps = grps_pb2_grpc.GrpsServiceStub(channel)
    message = grps_pb2.GrpsMessage(model="sk-v1")
    message.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT64, shape=[1, 4],
                                 flat_float64=ROW)
    inline, pool = counts(dispatcher)
    answers = [grps.Predict(message, timeout=30) for _ in range(30)]
    assert all(a.status.code == 200 and a == answers[0] for a in answers)
    assert counts(dispatcher) == (inline + 29, pool + 1)  # the method's first call: in the pool


def test_a_model_that_computes_long_stays_in_the_pool(served: Any) -> None:
    dispatcher, channel, _ = served
    inline = dispatcher.inline_calls
    for _ in range(8):
        assert values(infer(channel, "busy", [ROW])) == [sum(ROW)]
    assert dispatcher.inline_calls == inline


def test_a_model_that_waits_holds_the_loop_at_most_once(served: Any) -> None:
    """30 ms of sleep is no CPU, so the pool measures it as brief; the one call that then runs
    on the loop takes 30 ms there and sends the model back to the pool for DEMOTE_S."""
    dispatcher, channel, _ = served
    inline = dispatcher.inline_calls
    for _ in range(24):  # without the demotion, the mean alone would let every ~8th call back
        assert values(infer(channel, "sleepy", [ROW])) == [sum(ROW)]
    assert dispatcher.inline_calls - inline == 1


def test_a_call_long_in_cpu_on_the_loop_only_raises_the_mean(served: Any) -> None:
    """A call on the loop that computed long (as the collector or a preemption makes one) did not
    wait: the model is not sent off the loop for DEMOTE_S, it comes back once its mean is low."""
    dispatcher, channel, _ = served
    for _ in range(10):
        infer(channel, "spiky", [ROW])
    inline = dispatcher.inline_calls
    assert values(infer(channel, "spiky", [[99.0, 0.0, 0.0, 0.0]])) == [99.0]
    assert dispatcher.inline_calls == inline + 1  # the long call itself ran on the loop
    for _ in range(30):
        infer(channel, "spiky", [ROW])
    # 4.5 ms lifts the mean to over 1 ms: one call in the pool (costing nothing) brings it under.
    assert dispatcher.inline_calls - inline == 1 + 29, counts(dispatcher)


def test_calls_waiting_in_the_pool_leave_the_loop_serving(served: Any) -> None:
    """While two calls wait in pool threads (for a gate file), brief calls on the loop are
    answered; then the gate opens and the waiting calls finish too."""
    dispatcher, channel, root = served
    stub = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(channel)
    tensor = pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP64", shape=[1, 4], contents=pb.InferTensorContents(fp64_contents=ROW))
    waiting = [stub.ModelInfer.future(pb.ModelInferRequest(model_name="gate", inputs=[tensor]),
                                      timeout=60) for _ in range(2)]
    inline = dispatcher.inline_calls
    answers = [infer(channel, "sk", [ROW]) for _ in range(5)]
    assert all(values(a) == values(answers[0]) for a in answers)
    assert dispatcher.inline_calls - inline == 5
    assert not any(call.done() for call in waiting)
    (root / "gate" / "open").touch()
    assert [values(call.result()) for call in waiting] == [[sum(ROW)]] * 2


def test_aborts_keep_their_status_and_words_on_the_loop(served: Any) -> None:
    dispatcher, channel, _ = served
    infer(channel, "sk", [ROW])  # known and brief, whichever tests ran before
    seen = set()
    inline = dispatcher.inline_calls
    for _ in range(6):
        with pytest.raises(grpc.RpcError) as caught:
            infer(channel, "nosuch", [ROW])
        seen.add((caught.value.code(), caught.value.details()))
    assert len(seen) == 1, seen
    code, details = seen.pop()
    assert code == grpc.StatusCode.NOT_FOUND and "nosuch" in details
    wrong = set()
    for _ in range(6):  # a known, brief model: the bad request's error as the pool gives it
        with pytest.raises(grpc.RpcError) as caught:
            infer(channel, "sk", [[1.0, 2.0]])
        wrong.add((caught.value.code(), caught.value.details()))
    assert len(wrong) == 1 and next(iter(wrong))[0] == grpc.StatusCode.INVALID_ARGUMENT, wrong
    # The first call to the unknown model ran in the pool; the rest of both kinds on the loop.
    assert dispatcher.inline_calls - inline == 11, counts(dispatcher)


def test_large_requests_run_in_the_pool(served: Any) -> None:
    dispatcher, channel, _ = served
    infer(channel, "sk", [ROW])
    rows = [ROW] * 3000  # 96 KiB of FP64 contents, over the 64 KiB bound
    pool = dispatcher.pool_calls
    answer = infer(channel, "sk", rows)
    assert answer.outputs[0].shape == [3000]
    assert dispatcher.pool_calls == pool + 1


def test_zero_sends_every_call_to_the_pool(tmp_path: Path) -> None:
    from grpcserve.server import build_server

    server, port = build_server(_emulator(tmp_path, inline_ms=0), port=0)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _ in range(10):
                infer(channel, "sk", [ROW])
        assert counts(server.dispatcher) == (0, 10)
    finally:
        server.stop(None)

