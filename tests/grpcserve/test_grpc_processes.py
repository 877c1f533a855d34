"""`app.py serve` runs MLEMU_GRPC_WORKERS gRPC processes on one port (SO_REUSEPORT): each of
them answers, their metrics add up, and the port is still theirs alone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.conftest import LiveServer, start_server, stop_server
from tests.kit import modelkit
from tests.protocols.conftest import (
    PROJECT,
    fresh_channel,
    grpc_processes,
    serving_pid,
    start_protocol_server,
)

pytestmark = pytest.mark.slow

ROW = [0.5, -1.0, 2.0, 0.1]
CONTENTS = {"INT64": "int64_contents", "FP64": "fp64_contents", "FP32": "fp32_contents"}
RAW = {"INT64": "<i8", "FP64": "<f8", "FP32": "<f4"}


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """The model's directory and its answer to ROW."""
    root = tmp_path_factory.mktemp("grpc-processes")
    model = modelkit.sklearn_model(root / "sk", "logreg", features=4)
    return root, model.predict([ROW]).tolist()


@pytest.fixture(scope="module")
def server(expected: tuple[Path, list[Any]]) -> Iterator[LiveServer]:
    root = expected[0]
    entries = {"sk": {"versions": {"v1": {"deploymentUri": str(root / "sk"),
                                          "framework": "SCIKIT_LEARN"}}}}
    # one gunicorn worker, two gRPC processes of their own: the setting replaces the default
    # layout (gRPC served by the worker)
    live = start_protocol_server((root, entries), env={"MLEMU_GRPC_WORKERS": "2"})
    yield live
    stop_server(live.proc)


def infer(channel: Any) -> list[Any]:
    request = service_pb2.ModelInferRequest(model_name="sk")
    request.inputs.add(name="x", datatype="FP64", shape=[1, 4]).contents.fp64_contents[:] = ROW
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    response = stub.ModelInfer(request, timeout=10)
    output = response.outputs[0]
    if response.raw_output_contents:  # little-endian values, as the protocol says
        return np.frombuffer(response.raw_output_contents[0], RAW[output.datatype]).tolist()
    return list(getattr(output.contents, CONTENTS[output.datatype]))


def grpc_requests_counted(server: LiveServer) -> int:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return sum(int(s.value) for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == "mlemu_requests_total"
               and s.labels.get("transport") == "grpc" and s.labels.get("method") == "ModelInfer")


def test_every_grpc_process_serves_and_their_metrics_add_up(
        server: LiveServer, expected: tuple[Path, list[Any]]) -> None:
    processes = grpc_processes(server)
    assert len(processes) == 2
    answered: dict[int, int] = {}
    calls = 0
    assert server.grpc_target
    while set(answered) != processes:  # the kernel picks a process per connection (a hash)
        assert calls < 64, answered  # both listen: 64 connections to one has odds of 2**-63
        with fresh_channel(server.grpc_target) as channel:
            assert infer(channel) == expected[1]
            calls += 1
            pid = serving_pid(server, channel)
            answered[pid] = answered.get(pid, 0) + 1
    # each process records its own counts (prometheus multiprocess files per pid); /metrics,
    # served by gunicorn, sums them: flushed every second, so wait for the total to settle
    deadline = time.monotonic() + 30
    while grpc_requests_counted(server) < calls and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.5)  # one more flush period: anything counted twice would show
    assert grpc_requests_counted(server) == calls


def test_a_second_server_on_the_same_grpc_port_fails_to_start(
        server: LiveServer, expected: tuple[Path, list[Any]], tmp_path: Path) -> None:
    assert server.grpc_target
    port = int(server.grpc_target.rsplit(":", 1)[1])
    # the other server would set SO_REUSEPORT too; it must refuse the port, not share it
    with pytest.raises(RuntimeError, match="server exited") as caught:
        start_server(tmp_path / "other", grpc_port=port, timeout=60,
                     env={"MLEMU_GRPC_WORKERS": "2", "MLEMU_PROJECT": PROJECT})
    assert f"cannot listen on 127.0.0.1:{port}" in str(caught.value)
    # and the first one still serves on every process
    assert len(grpc_processes(server)) == 2
    with fresh_channel(server.grpc_target) as channel:
        assert infer(channel) == expected[1]
