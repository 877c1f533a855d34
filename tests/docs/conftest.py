"""The server the documentation's examples run against: `make serve`'s (the demo models of
demo/bootstrap.yaml, project `demo`, HTTP and gRPC), shared by this package's modules."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, LiveServer, free_port, start_server, stop_server


@pytest.fixture(scope="package")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Trains the demo models where `make serve` does (skipped when present) and serves them; TensorFlow
    is loaded at warm-up."""
    subprocess.run([sys.executable, str(ROOT / "demo" / "make_models.py")], check=True)
    state: Path = tmp_path_factory.mktemp("demo") / "state"
    # as `make serve`: the demo's XGBoost model is explained (an mlemu extension on ml v1)
    server = start_server(state, ROOT / "demo" / "bootstrap.yaml",
                          env={"MLEMU_PROJECT": "demo", "MLEMU_EXPLAIN_ANY_FRAMEWORK": "true"},
                          grpc_port=free_port())
    yield server
    stop_server(server.proc)
