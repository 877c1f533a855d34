"""A live mlemu server for tests that drive it with the Vertex AI SDK (google-cloud-aiplatform):
started with gRPC and the Cloud Storage emulator the SDK stages local artifacts through, and
`aiplatform.init` pointed at it (REST, anonymous credentials), as docs/vertex.md tells a user."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LiveServer, free_port, start_server, stop_server


@contextlib.contextmanager
def sdk_server(gcs_emulator: Any, base: Path, bucket: str, env: dict[str, str] | None = None,
               ) -> Iterator[tuple[LiveServer, Any]]:
    """A server with its state in `base`/state and `env`, the staging `bucket` created; yields
    the server and the initialised `aiplatform` module; stops the server afterwards."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    gcs_emulator.client().create_bucket(bucket)
    server = start_server(base / "state", env={"STORAGE_EMULATOR_HOST": gcs_emulator.host,
                                               **(env or {})}, grpc_port=free_port())
    monkey = pytest.MonkeyPatch()
    monkey.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.host)  # the SDK stages through it
    try:
        aiplatform.init(project="demo", location="us-central1", api_endpoint=server.url,
                        api_transport="rest", credentials=AnonymousCredentials(),
                        staging_bucket=f"gs://{bucket}")
        yield server, aiplatform
    finally:
        monkey.undo()
        stop_server(server.proc)
