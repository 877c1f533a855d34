"""The pytest plugin (entry point `pytest11: mlemu`): options and fixtures.

Fixtures:
  mlemu_bootstrap  (session) the bootstrap file the server starts with; None by default.
                   Override it in your conftest.py to serve your models.
  mlemu_server     (session) the running server: `url`, `grpc_target`, `controls`.
  mlemu            (function) the controls client, after a reset: each test starts from the
                   bootstrap state with no fault or timing rule and an empty journal.
  ml_v1            (function) googleapiclient's ml v1 client against the server.
  vertex_init      (function) `aiplatform.init(...)` pointed at the server; returns the module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mlemu.client import Mlemu
from pytest_mlemu.server import MlemuServer, command_for


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlemu", "mlemu, the Google Cloud prediction emulator")
    group.addoption("--mlemu-url", default=os.environ.get("MLEMU_URL"),
                    help="Use the mlemu server at this URL (e.g. a container) [MLEMU_URL].")
    group.addoption("--mlemu-grpc", default=os.environ.get("MLEMU_GRPC_TARGET"),
                    help="Its gRPC host:port, with --mlemu-url [MLEMU_GRPC_TARGET].")
    group.addoption("--mlemu-checkout", default=os.environ.get("MLEMU_CHECKOUT"),
                    help="Start mlemu from this source tree [MLEMU_CHECKOUT].")
    group.addoption("--mlemu-command", default=os.environ.get("MLEMU_COMMAND"),
                    help="Start mlemu with this command (default: `mlemu` on PATH) "
                         "[MLEMU_COMMAND].")
    group.addoption("--mlemu-workers", type=int, default=1,
                    help="gunicorn workers of a started server.")


@pytest.fixture(scope="session")
def mlemu_bootstrap() -> Path | None:
    """The bootstrap file (YAML, mlemu's format) a started server serves; None: no models."""
    return None


@pytest.fixture(scope="session")
def mlemu_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                 mlemu_bootstrap: Path | None) -> Iterator[MlemuServer]:
    config = request.config
    url = config.getoption("--mlemu-url")
    if url:
        yield MlemuServer.attach(url, config.getoption("--mlemu-grpc"))
        return
    command = command_for(config.getoption("--mlemu-checkout"),
                          config.getoption("--mlemu-command"))
    server = MlemuServer.start(command, tmp_path_factory.mktemp("mlemu-state"),
                               bootstrap=mlemu_bootstrap,
                               workers=config.getoption("--mlemu-workers"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mlemu(mlemu_server: MlemuServer) -> Mlemu:
    """The controls, after a reset (fast: the bootstrap models stay loaded)."""
    mlemu_server.controls.reset()
    return mlemu_server.controls


@pytest.fixture
def ml_v1(mlemu_server: MlemuServer) -> Any:
    """googleapiclient's ml v1 client (anonymous credentials) against the server."""
    from google.auth.credentials import AnonymousCredentials
    from googleapiclient.discovery import build

    return build("ml", "v1", static_discovery=True, credentials=AnonymousCredentials(),
                 client_options={"api_endpoint": mlemu_server.url}, cache_discovery=False)


@pytest.fixture
def vertex_init(mlemu_server: MlemuServer) -> Any:
    """`google.cloud.aiplatform`, initialised against the server (REST transport, anonymous
    credentials, the server's default project, us-central1)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    host = mlemu_server.url.split("://", 1)[1]
    aiplatform.init(project=mlemu_server.project, location="us-central1",
                    api_endpoint=host, api_transport="rest",
                    credentials=AnonymousCredentials())
    return aiplatform
