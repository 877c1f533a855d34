"""Cloud Logging JSON lines from a live server (MLEMU_LOG_FORMAT=json): every line parses, access
log entries carry httpRequest and the trace of X-Cloud-Trace-Context or traceparent, and a custom
predictor's print and logging appear attributed to its model and version."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests

from tests.conftest import LiveServer, free_port, start_server, stop_server
from tests.kit import modelkit

pytestmark = pytest.mark.slow

TRACE_A = "105445aa7843bc8bf206b12000100000"
TRACE_B = "4bf92f3577b34da6a3ce929d0e0e4736"
PROJECT = "my-gcp-project"

CHATTY_SOURCE = '''
import logging
import sys
import sys

log = logging.getLogger("chatty")


class ChattyPredictor:
    @classmethod
    def from_path(cls, model_dir):
        print("chatty loading")
        return cls()

    def predict(self, instances, **kwargs):
        print("chatty predicts", len(instances), "rows")
        print("to stderr", file=sys.stderr)
        log.warning("chatty warns about %d rows", len(instances))
        return [sum(row) for row in instances]
'''


def lines(server: LiveServer) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.output().splitlines() if line.strip()]


def wait_for(server: LiveServer, match: Any) -> list[dict[str, Any]]:
    """The parsed lines once one matches (the access log line follows the answer)."""
    deadline = time.monotonic() + 30
    while True:
        found = lines(server)
        if any(match(entry) for entry in found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("json-logs")
    package = modelkit.custom_package(root / "pkg", "chatty_predictor", CHATTY_SOURCE, kind="dir")
    config = modelkit.bootstrap_file(root / "bootstrap.yaml", {
        "chatty": {"versions": {"v7": {"deploymentUri": str(modelkit.custom_model_dir(root / "m")),
                                       "predictionClass": "chatty_predictor.ChattyPredictor",
                                       "packageUris": [str(package)]}}}})
    live = start_server(root / "state", config, workers=2, grpc_port=free_port(),
                        env={"MLEMU_LOG_FORMAT": "json", "MLEMU_TRACE_PROJECT": PROJECT,
                             "MLEMU_PROJECT": "p"})
    yield live
    stop_server(live.proc)


def test_every_line_is_cloud_logging_json(server: LiveServer) -> None:
    found = lines(server)  # raises if any line (master, workers, gRPC process) is not JSON
    assert found
    for entry in found:
        assert entry["severity"] in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
        assert isinstance(entry["message"], str) and entry["time"].endswith("+00:00")
    assert any("Booting worker" in e["message"] for e in found)  # gunicorn's own lines too
    assert any("gRPC" in e["message"] for e in found)  # and the gRPC process's


def test_access_log_carries_http_request_and_the_cloud_trace(server: LiveServer) -> None:
    url = f"{server.url}/v1/projects/p/models/chatty/versions/v7:predict"
    answer = requests.post(url, json={"instances": [[1, 2]]}, timeout=10,
                           headers={"X-Cloud-Trace-Context": f"{TRACE_A}/1;o=1",
                                    "User-Agent": "trace-test"})
    assert answer.status_code == 200
    trace = f"projects/{PROJECT}/traces/{TRACE_A}"
    found = wait_for(server, lambda e: e.get("logging.googleapis.com/trace") == trace
                     and "httpRequest" in e)
    access = [e for e in found if e.get("logging.googleapis.com/trace") == trace
              and "httpRequest" in e]
    assert len(access) == 1
    entry = access[0]
    http = entry["httpRequest"]
    assert http["requestMethod"] == "POST" and http["status"] == 200
    assert http["requestUrl"].endswith("/v1/projects/p/models/chatty/versions/v7:predict")
    assert http["userAgent"] == "trace-test" and http["remoteIp"] == "127.0.0.1"
    assert http["latency"].endswith("s") and int(http["responseSize"]) == len(answer.content)
    assert entry["logging.googleapis.com/spanId"] == "0000000000000001"
    assert entry["logging.googleapis.com/trace_sampled"] is True
    assert entry["logging.googleapis.com/labels"] == {"model": "chatty", "version": "v7"}


def test_predictor_print_and_logging_are_attributed_and_traced(server: LiveServer) -> None:
    url = f"{server.url}/v1/projects/p/models/chatty:predict?fields=predictions"  # via Flask
    parent = f"00-{TRACE_B}-00f067aa0ba902b7-01"
    answer = requests.post(url, json={"instances": [[1, 2], [3, 4], [5, 6]]}, timeout=10,
                           headers={"traceparent": parent})
    assert answer.json() == {"predictions": [3, 7, 11]}
    trace = f"projects/{PROJECT}/traces/{TRACE_B}"
    found = wait_for(server, lambda e: e.get("logging.googleapis.com/trace") == trace
                     and "httpRequest" in e)
    mine = [e for e in found if e.get("logging.googleapis.com/trace") == trace]
    by_message = {e["message"]: e for e in mine}
    labels = {"model": "chatty", "version": "v7"}
    printed = by_message["chatty predicts 3 rows"]
    assert printed["severity"] == "INFO" and printed["logger"] == "mlemu.predictor"
    assert printed["logging.googleapis.com/labels"] == labels
    assert printed["logging.googleapis.com/spanId"] == "00f067aa0ba902b7"
    assert by_message["to stderr"]["severity"] == "ERROR"
    warned = by_message["chatty warns about 3 rows"]
    assert warned["severity"] == "WARNING" and warned["logger"] == "chatty"
    assert warned["logging.googleapis.com/labels"] == labels
    # the load's own print (warm-up, no request) is attributed too
    loading = [e for e in lines(server) if e["message"] == "chatty loading"]
    assert loading and all(e["logging.googleapis.com/labels"] == labels for e in loading)


def test_grpc_calls_carry_the_traceparent_of_their_metadata(server: LiveServer) -> None:
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    trace = "0af7651916cd43dd8448eb211c80319c"
    assert server.grpc_target
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="chatty")
        request.inputs.add(name="x", datatype="INT64", shape=[1, 2]).contents.int64_contents[:] = [
            20, 22]
        deadline = time.monotonic() + 60
        while True:  # the gRPC process warms up on its own
            try:
                stub.ModelInfer(request, timeout=10,
                                metadata=[("traceparent", f"00-{trace}-b7ad6b7169203331-00")])
                break
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    full = f"projects/{PROJECT}/traces/{trace}"
    found = wait_for(server, lambda e: e.get("message") == "chatty predicts 1 rows"
                     and e.get("logging.googleapis.com/trace") == full)
    printed = [e for e in found if e.get("logging.googleapis.com/trace") == full]
    assert printed and printed[0]["message"] == "chatty predicts 1 rows"
    assert printed[0]["logging.googleapis.com/labels"] == {"model": "chatty", "version": "v7"}
    assert printed[0]["logging.googleapis.com/trace_sampled"] is False


def test_text_is_the_default_and_json_the_container_default(tmp_path: Path) -> None:
    from core.settings import Settings

    assert Settings.from_env({}).log_format == "text"
    dockerfile = (Path(__file__).resolve().parents[2] / "deploy" / "Dockerfile").read_text()
    assert "MLEMU_LOG_FORMAT=json" in dockerfile


def test_native_stderr_lines_become_records_at_their_own_severity(
        caplog: pytest.LogCaptureFixture) -> None:
    import os

    from observability.logs import native_stderr

    with caplog.at_level(logging.DEBUG, logger="tensorflow"), native_stderr("tensorflow"):
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are "
                    b"written to STDERR\n"
                    b"I0000 00:00:1795546767.478300   31529 port.cc:153] oneDNN custom operations "
                    b"are on.\n"
                    b"I0000 00:00:1795546767.544413   31529 cpu_feature_guard.cc:227] This "
                    b"TensorFlow binary is optimized.\nTo enable the following instructions: AVX2\n"
                    b"E0000 00:00:1795546767.544413   31529 cuda.cc:1] no GPU\n")
    found = [(r.levelno, r.getMessage()[:20]) for r in caplog.records if r.name == "tensorflow"]
    assert found == [(logging.DEBUG, "WARNING: All log mes"), (logging.DEBUG, "I0000 00:00:17955467"),
                     (logging.DEBUG, "I0000 00:00:17955467"), (logging.DEBUG, "To enable the follow"),
                     (logging.ERROR, "E0000 00:00:17955467")]


def test_a_logged_exception_carries_its_traceback_as_stack_trace() -> None:
    from observability.logs import cloud_logging_formatter

    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError:
        record = logging.LogRecord("mlemu", logging.ERROR, __file__, 1, "failed", None,
                                   sys.exc_info())
    entry = json.loads(cloud_logging_formatter().format(record))
    assert entry["severity"] == "ERROR" and entry["message"] == "failed"
    assert entry["stack_trace"].startswith("Traceback") and "ZeroDivisionError" in entry["stack_trace"]
