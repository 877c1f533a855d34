"""Prometheus metrics of a live multi-worker server (gunicorn workers serving HTTP and gRPC): after
traffic over every protocol, the merged /metrics counts what was sent, label by label."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.grpc import service_pb2, service_pb2_grpc

from protocols.proto_modules import grps_pb2, grps_pb2_grpc
from tests.conftest import LiveServer, stop_server
from tests.protocols.conftest import build_models, start_protocol_server

pytestmark = pytest.mark.slow

ROW = [0.5, -1.0, 2.0, 0.1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("metrics-models")
    live = start_protocol_server((root, build_models(root)), workers=2)
    yield live
    stop_server(live.proc)


def samples(server: LiveServer, name: str) -> list[Any]:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return [s for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name]


def by_labels(found: list[Any], *keys: str) -> Counter[tuple[str, ...]]:
    totals: Counter[tuple[str, ...]] = Counter()
    for sample in found:
        totals[tuple(sample.labels.get(k, "") for k in keys)] += int(sample.value)
    return totals


def send_traffic(server: LiveServer) -> Counter[tuple[str, ...]]:
    """Requests over every protocol; returns what was sent as
    (transport, protocol, method, model, version, code) -> count."""
    sent: Counter[tuple[str, ...]] = Counter()
    url = server.url
    with requests.Session() as http:
        for _ in range(12):  # the :predict fast path, spread over both workers
            r = http.post(f"{url}/v1/projects/mlemu/models/sk/versions/v1:predict",
                          json={"instances": [ROW, ROW]})
            assert r.status_code == 200
            sent["http", "aiplatform", "predict", "sk", "v1", "200"] += 1
        for _ in range(3):  # through Flask (fields= is not for the fast path), default version
            r = http.post(f"{url}/v1/projects/mlemu/models/sk:predict?fields=predictions",
                          json={"instances": [ROW]})
            assert r.status_code == 200
            sent["http", "aiplatform", "predict", "sk", "v1", "200"] += 1
        for _ in range(2):  # an unknown model never becomes a label value
            r = http.post(f"{url}/v1/projects/mlemu/models/nosuch-model:predict",
                          json={"instances": [ROW]})
            assert r.status_code == 404
            sent["http", "aiplatform", "predict", "", "", "404"] += 1
        for _ in range(4):
            r = http.post(f"{url}/v1/models/sk:predict", json={"instances": [ROW]})
            assert r.status_code == 200
            # TF Serving's Latest: the highest numbered version, v2 (v1 is the default)
            sent["http", "tfserving", "predict", "sk", "v2", "200"] += 1
        body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": ROW}]}
        for _ in range(5):
            assert http.post(f"{url}/v2/models/sk/versions/v2/infer", json=body).status_code == 200
            sent["http", "v2", "infer", "sk", "v2", "200"] += 1
        assert http.get(f"{url}/grps/v1/health/online").status_code == 200
        sent["http", "grps", "health.online", "", "", "200"] += 1
        for _ in range(3):
            r = http.post(f"{url}/grps/v1/infer/predict?model=xgb-v1",
                          json={"ndarray": [[0.5, -1.0, 2.0]]})
            assert r.status_code == 200, r.text
            sent["http", "grps", "infer.predict", "xgb", "v1", "200"] += 1
    assert server.grpc_target
    with grpc.insecure_channel(server.grpc_target) as channel:
        v2 = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for _ in range(6):
            request = service_pb2.ModelInferRequest(model_name="sk")
            request.inputs.add(name="x", datatype="FP64", shape=[1, 4]).contents.fp64_contents[:] = ROW
            v2.ModelInfer(request, timeout=10)
            sent["grpc", "v2", "ModelInfer", "sk", "v1", "OK"] += 1
        unknown = service_pb2.ModelInferRequest(model_name="nosuch")
        unknown.inputs.add(name="x", datatype="FP64", shape=[1, 4]).contents.fp64_contents[:] = ROW
        with pytest.raises(grpc.RpcError) as caught:
            v2.ModelInfer(unknown, timeout=10)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        sent["grpc", "v2", "ModelInfer", "", "", "NOT_FOUND"] += 1
        grps = grps_pb2_grpc.GrpsServiceStub(channel)
        for _ in range(2):
            message = grps_pb2.GrpsMessage(model="sk-v1")
            message.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT64, shape=[1, 4],
                                         flat_float64=ROW)
            assert grps.Predict(message, timeout=10).status.code == 200
            sent["grpc", "grps", "Predict", "sk", "v1", "OK"] += 1
    return sent


KEYS = ("transport", "protocol", "method", "model", "version", "code")


def settled(server: LiveServer, sent: Counter[tuple[str, ...]]) -> Counter[tuple[str, ...]]:
    """The counted requests once every process has flushed what `sent` made it record (each
    flushes every second; the scraped worker just before answering)."""
    deadline = time.monotonic() + 30
    while True:
        counted = by_labels(samples(server, "mlemu_requests_total"), *KEYS)
        if all(counted[k] >= n for k, n in sent.items()) or time.monotonic() > deadline:
            time.sleep(1.5)  # one more flush period: anything late would show as a mismatch
            return by_labels(samples(server, "mlemu_requests_total"), *KEYS)
        time.sleep(0.2)


def test_counters_add_up_across_processes(server: LiveServer) -> None:
    sent = send_traffic(server)
    keys = KEYS
    counted = settled(server, sent)
    for key, count in sent.items():
        assert counted[key] == count, (key, counted)
    assert not [k for k in counted if "nosuch" in "".join(k)]
    # every request also has its latency observed, once
    durations = by_labels(samples(server, "mlemu_request_duration_seconds_count"), *keys[:5])
    for key in {k[:5] for k in sent}:
        assert durations[key] == sum(n for k, n in sent.items() if k[:5] == key)
    # both workers served (the fast path's requests alone spread over them) and serve gRPC
    # themselves (MLEMU_GRPC_WORKERS unset), all ready before the traffic: each of the two has
    # loaded sk v1 once for both transports (models_loaded sums the live processes)
    loaded = by_labels(samples(server, "mlemu_models_loaded"), "model", "version")
    assert loaded["sk", "v1"] == 2
    pids = {s.labels["pid"] for s in samples(server, "process_resident_memory_bytes")}
    assert len(pids) >= 2
    # instances per request: the 12 fast-path requests had 2 rows each
    instances = samples(server, "mlemu_instances_per_request_sum")
    assert by_labels(instances, "model", "version")["sk", "v1"] >= 12 * 2 + 3
    calls = by_labels(samples(server, "mlemu_model_call_duration_seconds_count"), "model", "version")
    # sk v2: the 5 V2 requests naming it and the 4 versionless TF Serving ones (Latest)
    assert calls["sk", "v2"] == 5 + 4 and calls["xgb", "v1"] == 3
