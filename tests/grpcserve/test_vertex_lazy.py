"""Vertex AI's PredictionService over gRPC imports google-cloud-aiplatform's message types on its
first call, not when the server starts (every gunicorn worker starts one), and still reports a
request that does not parse by the message's own name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import sys
from pathlib import Path

import grpc
from boot import build_emulator
from core.settings import Settings
from grpcserve.server import build_server

TYPES = "google.cloud.aiplatform_v1.types.prediction_service"
emu = build_emulator(Settings(state_dir=Path(sys.argv[1]), threads=4), warm=False)
server, port = build_server(emu, port=0)
server.start()
print("imported at start:", TYPES in sys.modules)
with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
    predict = channel.unary_unary("/google.cloud.aiplatform.v1.PredictionService/Predict",
                                  request_serializer=bytes, response_deserializer=bytes)
    try:
        predict(b"\xff\xff\xff", timeout=60)  # not a PredictRequest
    except grpc.RpcError as exc:
        print("status:", exc.code().name)
        print("details:", exc.details())
print("imported after a call:", TYPES in sys.modules)
server.stop(None)
'''


def test_vertex_types_load_on_the_first_call(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "state")], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert "imported at start: False" in lines, ran.stdout
    assert "status: INVALID_ARGUMENT" in lines, ran.stdout
    details = next(line for line in lines if line.startswith("details:"))
    assert "google.cloud.aiplatform.v1.PredictRequest" in details, details
    assert "imported after a call: True" in lines, ran.stdout
