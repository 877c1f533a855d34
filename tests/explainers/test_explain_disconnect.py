"""`:explain` on a live server stops when its client goes: the model is held inside its first
call while the client disconnects; once released, the explanation ends (499 CANCELLED in the
metrics) instead of making the request's remaining 79 model calls for nobody."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import LiveServer, start_server, stop_server
from tests.kit import modelkit

pytestmark = pytest.mark.slow

GATED = '''
import os
import time

CALLS = {calls!r}
HOLD = {hold!r}


class GatedPredictor:
    """Sums each row; records every call, and waits while the HOLD file exists."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        with open(CALLS, "a") as f:
            f.write("call\\n")
        deadline = time.monotonic() + 60
        while os.path.exists(HOLD) and time.monotonic() < deadline:
            time.sleep(0.01)
        return [float(sum(row)) for row in instances]
'''


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("explain-gone")
    (root / "pkg").mkdir()
    (root / "pkg" / "gated_predictor.py").write_text(
        GATED.format(calls=str(root / "calls"), hold=str(root / "hold")))
    (root / "model").mkdir()
    (root / "model" / "explanation_metadata.json").write_text(json.dumps({
        "inputs": {"data": {"input_baselines": [[0.0, 0.0, 0.0]], "encoding": "identity"}},
        "outputs": {"value": {}}, "framework": "custom_container"}))
    config = modelkit.bootstrap_file(root / "boot.yaml", {"gated": {"versions": {"v1": {
        "deploymentUri": str(root / "model"), "predictionClass": "gated_predictor.GatedPredictor",
        "packageUris": [str(root / "pkg")],
        "explanationConfig": {"sampledShapleyAttribution": {"numPaths": 1}}}}}}, project="p")
    # a custom predictor explained on ml v1: the mlemu extension MLEMU_EXPLAIN_ANY_FRAMEWORK
    live = start_server(root / "state", config, workers=1,
                        env={"MLEMU_PROJECT": "p", "MLEMU_EXPLAIN_ANY_FRAMEWORK": "true"})
    yield {"root": root, "server": live}
    stop_server(live.proc)


def _cancelled(server: LiveServer) -> float:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("mlemu_requests_total{") and 'method="explain"' in line
               and 'code="499"' in line)


def _calls(root: Path) -> int:
    path = root / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_an_explanation_whose_client_left_stops(world: dict[str, Any]) -> None:
    root, server = world["root"], world["server"]
    body = json.dumps({"instances": [[1.0, 2.0, 3.0]] * 40}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    (root / "hold").write_text("")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /v1/projects/p/models/gated:explain HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                     + body)
        deadline = time.monotonic() + 60
        while _calls(root) < 1:  # the explanation is inside its first model call
            assert time.monotonic() < deadline, server.output()[-2000:]
            time.sleep(0.02)
    (root / "hold").unlink()  # the client is gone; let the model answer
    deadline = time.monotonic() + 60
    while _cancelled(server) < 1:
        assert time.monotonic() < deadline, (_calls(root), server.output()[-2000:])
        time.sleep(0.1)
    assert _calls(root) <= 2  # of the 80 (40 instances x (1 + 1 path)) the request asked for
    # The server goes on explaining for callers who stay.
    answer = requests.post(f"{server.url}/v1/projects/p/models/gated:explain",
                           json={"instances": [[1.0, 2.0, 3.0]]}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["explanations"][0]["attributions_by_label"][0]["example_score"] == 6.0
