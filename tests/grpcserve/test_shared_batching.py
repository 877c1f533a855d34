"""`app.py serve` serves HTTP and gRPC from the same processes: one-row V2 calls of both
transports to one model, in flight together, are merged into one model call by the worker's one
batcher, and the batching metrics count that merged call."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.conftest import stop_server
from tests.kit import modelkit
from tests.protocols.conftest import fresh_channel, grpc_processes, start_protocol_server

pytestmark = pytest.mark.slow

# Row-independent (batchable) sums. Every call appends its rows to MODEL_DIR/calls. The call
# whose first row is HOLD waits for MODEL_DIR/release, writing meanwhile to MODEL_DIR/queued how
# many other threads are inside the batcher's queue (predictors/merging.py, Merger.predict): the
# test releases it once the calls it sent are all queued, so what merges depends on no timing.
QUEUE_WATCHING_PREDICTOR = '''
import json
import os
import sys
import threading
import time


def _queued():
    me = threading.get_ident()
    count = 0
    for ident, frame in sys._current_frames().items():
        while frame is not None and ident != me:
            code = frame.f_code
            if code.co_name == "predict" and code.co_filename.endswith("merging.py"):
                count += 1
                break
            frame = frame.f_back
    return count


class QueueWatchingPredictor:
    batchable = True

    def __init__(self, model_dir):
        self.model_dir = model_dir

    @classmethod
    def from_path(cls, model_dir):
        return cls(model_dir)

    def predict(self, instances, **kwargs):
        rows = instances.tolist() if hasattr(instances, "tolist") else [list(r) for r in instances]
        with open(os.path.join(self.model_dir, "calls"), "a") as calls:
            calls.write(json.dumps(rows) + "\\n")
        if rows[0] == [9.0, 9.0]:
            deadline = time.monotonic() + 120
            while not os.path.exists(os.path.join(self.model_dir, "release")):
                if time.monotonic() > deadline:
                    raise RuntimeError("the test never released this call")
                with open(os.path.join(self.model_dir, "queued.tmp"), "w") as out:
                    out.write(str(_queued()))
                os.replace(os.path.join(self.model_dir, "queued.tmp"),
                           os.path.join(self.model_dir, "queued"))
                time.sleep(0.02)
        return [sum(row) for row in rows]
'''

HOLD = [9.0, 9.0]
HTTP_ROW = [1.0, 2.0]
GRPC_ROW = [10.0, 20.0]
PATIENCE_S = 120.0  # a bound on a hung server, not a speed requirement


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _rest_infer(url: str, row: list[float]) -> list[Any]:
    body = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP64", "data": row}]}
    response = requests.post(f"{url}/v2/models/summer/infer", json=body, timeout=PATIENCE_S)
    assert response.status_code == 200, response.text
    return list(response.json()["outputs"][0]["data"])


def _grpc_infer(target: str, row: list[float]) -> list[Any]:
    request = service_pb2.ModelInferRequest(model_name="summer")
    request.inputs.add(name="x", datatype="FP64", shape=[1, 2]).contents.fp64_contents[:] = row
    with fresh_channel(target) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(
            request, timeout=PATIENCE_S)
    output = response.outputs[0]
    if response.raw_output_contents:
        return np.frombuffer(response.raw_output_contents[0], "<f8").tolist()
    return list(output.contents.fp64_contents)


def _merged(url: str) -> tuple[float, float]:
    """(merged calls, requests in them) of the summer model, from /metrics."""
    text = requests.get(f"{url}/metrics", timeout=30).text
    found = {s.name: s.value for family in text_string_to_metric_families(text)
             for s in family.samples if s.name.startswith("mlemu_batch_merged_requests")
             and s.labels.get("model") == "summer"}
    return (found.get("mlemu_batch_merged_requests_count", 0.0),
            found.get("mlemu_batch_merged_requests_sum", 0.0))


def test_one_row_http_and_grpc_calls_merge_in_one_batcher(tmp_path: Path) -> None:
    model_dir = modelkit.custom_model_dir(tmp_path / "summer")
    package = modelkit.custom_package(tmp_path / "pkg", module="queue_watching",
                                      source=QUEUE_WATCHING_PREDICTOR, kind="dir")
    entries = {"summer": {"versions": {"v1": {
        "deploymentUri": str(model_dir), "packageUris": [str(package)],
        "predictionClass": "queue_watching.QueueWatchingPredictor"}}}}
    # one worker: it serves both transports (the default layout, no MLEMU_GRPC_WORKERS)
    server = start_protocol_server((tmp_path, entries), workers=1)
    try:
        assert server.grpc_target
        assert grpc_processes(server) == {int(p) for p in _children(server.proc.pid)}
        queued = model_dir / "queued"
        with ThreadPoolExecutor(3) as pool:
            held = pool.submit(_rest_infer, server.url, HOLD)
            _wait_until(queued.exists, "the first call to hold the model")
            http = pool.submit(_rest_infer, server.url, HTTP_ROW)
            grpc_call = pool.submit(_grpc_infer, server.grpc_target, GRPC_ROW)
            _wait_until(lambda: int(queued.read_text() or 0) >= 2,
                        "both calls to queue behind it")
            (model_dir / "release").touch()
            assert held.result() == [18.0]
            assert http.result() == [3.0]
            assert grpc_call.result() == [30.0]
        calls = [json.loads(line) for line in (model_dir / "calls").read_text().splitlines()]
        # the held call alone, then one call holding the HTTP row and the gRPC row
        assert calls[0] == [HOLD]
        assert len(calls) == 2 and sorted(calls[1]) == [HTTP_ROW, GRPC_ROW], calls
        # metrics are flushed every second: wait for the merged call to show, then check it
        _wait_until(lambda: _merged(server.url)[0] >= 1, "the merged call in /metrics")
        assert _merged(server.url) == (1.0, 2.0)
    finally:
        (model_dir / "release").touch()
        stop_server(server.proc)


def _children(pid: int) -> list[str]:
    return [child for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]

