"""SIGTERM drains like Cloud Run needs it: requests in flight when the signal arrives finish with
200 (HTTP under gunicorn and a gRPC call beside it), new connections are refused at once, and the
process tree exits well within Cloud Run's 10-second grace."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests

from tests.conftest import free_port, start_server, stop_server
from tests.kit import modelkit

pytestmark = pytest.mark.slow

# Each call announces itself in MODEL_DIR/started/ and then holds until MODEL_DIR/release exists,
# so the test knows exactly which requests are in flight when it sends the signal.
GATED_PREDICTOR = '''
import os
import time
import uuid


class GatedPredictor:
    def __init__(self, model_dir):
        self.model_dir = model_dir

    @classmethod
    def from_path(cls, model_dir):
        return cls(model_dir)

    def predict(self, instances, **kwargs):
        started = os.path.join(self.model_dir, "started")
        os.makedirs(started, exist_ok=True)
        open(os.path.join(started, uuid.uuid4().hex), "w").close()
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.model_dir, "release")):
            if time.monotonic() > deadline:
                raise RuntimeError("never released")
            time.sleep(0.02)
        return [sum(row) for row in instances]
'''

#: HTTP requests held in flight; each worker gets as many threads, as one worker may accept all.
HTTP_IN_FLIGHT = 5


def _wait_until(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    except TimeoutError:  # a handshake not completed in time (a loaded machine): not refused yet
        return False
    return False


def _grpc_infer(target: str) -> np.ndarray:
    import tritonclient.grpc as tgrpc

    client = tgrpc.InferenceServerClient(target)
    tensor = tgrpc.InferInput("x", [1, 2], "FP64")
    tensor.set_data_from_numpy(np.array([[1.0, 2.0]]))
    result = client.infer("gated", [tensor], client_timeout=30)
    return result.as_numpy(result.get_response().outputs[0].name)


def test_sigterm_finishes_in_flight_requests_and_refuses_new_ones(tmp_path: Path) -> None:
    model_dir = modelkit.custom_model_dir(tmp_path / "gated")
    package = modelkit.custom_package(tmp_path / "pkg", module="gated_predictor",
                                      source=GATED_PREDICTOR, kind="dir")
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {"gated": {"versions": {"v1": {
        "deploymentUri": str(model_dir), "predictionClass": "gated_predictor.GatedPredictor",
        "packageUris": [str(package)]}}}})
    grpc_port = free_port()
    server = start_server(tmp_path / "state", config, workers=2, grpc_port=grpc_port,
                          env={"MLEMU_THREADS": str(HTTP_IN_FLIGHT), "MLEMU_PROJECT": "p"})
    port = int(server.url.rsplit(":", 1)[1])
    predict_url = f"{server.url}/v1/projects/p/models/gated:predict"
    try:
        with ThreadPoolExecutor(HTTP_IN_FLIGHT + 1) as pool:
            http_calls = [pool.submit(requests.post, predict_url,
                                      json={"instances": [[i, 1.0]]}, timeout=30)
                          for i in range(HTTP_IN_FLIGHT)]
            grpc_call = pool.submit(_grpc_infer, server.grpc_target)
            started = model_dir / "started"
            _wait_until(lambda: started.is_dir() and len(list(started.iterdir())) == HTTP_IN_FLIGHT + 1,
                        "every request to reach the predictor")

            os.killpg(server.proc.pid, signal.SIGTERM)  # what `docker stop` / Cloud Run send
            _wait_until(lambda: _refused(port), "new HTTP connections to be refused", timeout=5)
            # the workers' gRPC servers stop listening at once too, their call still in flight
            _wait_until(lambda: _refused(grpc_port), "new gRPC connections to be refused",
                        timeout=15)  # a bound inside the held calls' own 30 s
            assert not any(call.done() for call in [*http_calls, grpc_call]), \
                "in-flight requests ended before they were released"

            (model_dir / "release").touch()
            responses = [call.result() for call in http_calls]
            grpc_result = grpc_call.result()
        assert [r.status_code for r in responses] == [200] * HTTP_IN_FLIGHT, \
            [r.text for r in responses]
        assert sorted(r.json()["predictions"][0] for r in responses) == \
            [i + 1.0 for i in range(HTTP_IN_FLIGHT)]
        assert grpc_result.tolist() == [3.0]
        # Cloud Run kills 10 s after SIGTERM; the drain above took well under that.
        assert server.proc.wait(timeout=10) == 0, server.output()
        assert _refused(port) and _refused(grpc_port)
    except (AssertionError, subprocess.TimeoutExpired):
        print(server.output())
        raise
    finally:
        (model_dir / "release").touch()
        stop_server(server.proc)
