"""Helpers for driving mlemu with Google's own ml v1 client (google-api-python-client)."""

from __future__ import annotations

import json
import time
from typing import Any

from google.auth.credentials import AnonymousCredentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

GATE_PREDICTOR = '''
import os
import time


class GatePredictor:
    """Loads only once the file `release` exists in the model directory (after writing
    `started`), so a test can hold a version in CREATING for as long as it needs."""

    @classmethod
    def from_path(cls, model_dir):
        open(os.path.join(model_dir, "started"), "a").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(model_dir, "release")):
            if time.monotonic() > deadline:
                raise RuntimeError("the test never released this model")
            time.sleep(0.05)
        return cls()

    def predict(self, instances, **kwargs):
        return [sum(row) for row in instances]
'''


def ml_client(url: str) -> Any:
    return build("ml", "v1", static_discovery=True, credentials=AnonymousCredentials(),
                 client_options={"api_endpoint": url}, cache_discovery=False)


ROWS = [[0.5, -1.0, 2.0, 0.1], [-2.0, 0.3, -0.7, 1.5]]


def create_version(ml: Any, model_name: str, version: str, uri: Any, **extra: Any) -> dict[str, Any]:
    """versions.create of `uri` under `model_name`; the returned Operation."""
    return dict(ml.projects().models().versions().create(
        parent=model_name, body={"name": version, "deploymentUri": str(uri), **extra},
    ).execute())


def predict_rows(ml: Any, name: str, rows: Any = ROWS) -> Any:
    """The predictions `name` (a model or version) gives for `rows`."""
    return ml.projects().predict(name=name, body={"instances": rows}).execute()["predictions"]


def wait_done(ml: Any, op: dict[str, Any], timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not op.get("done"):
        if time.monotonic() > deadline:
            raise AssertionError(f"operation {op['name']} not done after {timeout}s: {op}")
        time.sleep(0.1)
        op = ml.projects().operations().get(name=op["name"]).execute()
    return op


def wait_for_file(path: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.05)


def error_of(exc: HttpError) -> dict[str, Any]:
    """The Google error object inside an HttpError."""
    return dict(json.loads(exc.content)["error"])
