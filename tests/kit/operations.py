"""Waiting for a long-running operation through an in-process app's test client."""

from __future__ import annotations

import time
from typing import Any


def wait_operation(client: Any, op: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Poll an operation through the in-process app until it is done."""
    deadline = time.monotonic() + timeout
    while not op.get("done"):
        assert time.monotonic() < deadline, op
        time.sleep(0.05)
        op = client.get(f"/v1/{op['name']}").json
    return op
