""""Try it": the form's request sent to mlemu's own API for the console user, the answer with its
status and latency, and the same request as curl and as Python to copy.

Shared by a version's page (ml v1 `:predict`/`:explain`) and an endpoint's (Vertex AI's).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from flask import request

from console import session, snippets
from console.web import api, emulator
from core.errors import InvalidArgument

#: (base URL, resource name, method, body, IAM enforced) -> a Python snippet.
PythonSnippet = Callable[[str, str, str, Any, bool], str]


def base_url() -> str:
    """The URL clients use: MLEMU_PUBLIC_URL when set (e.g. behind Cloud Run), else this one."""
    return emulator().settings.public_url or request.host_url


def send(name: str, python: PythonSnippet) -> dict[str, Any]:
    """The posted try-it form sent as `POST /v1/{name}:{method}`; what the page shows of it."""
    session.check_csrf(request)
    method = request.form.get("method", "predict")
    if method not in snippets.METHODS:
        raise InvalidArgument(f"Unknown method {method!r}: predict or explain.")
    text = request.form.get("body", "")
    try:
        body = json.loads(text)
    except ValueError as exc:
        return {"error": f"The body is not JSON: {exc}", "method": method, "text": text}
    started = time.perf_counter()
    answer = api("POST", f"/v1/{name}:{method}", json.dumps(body).encode())
    elapsed_ms = (time.perf_counter() - started) * 1000
    parsed = answer.json()
    enforced = session.enforced()
    return {"method": method, "text": text, "status": answer.status, "ms": elapsed_ms,
            "answer": json.dumps(parsed, indent=2) if parsed is not None
            else answer.body.decode("utf-8", "replace"),
            "curl": snippets.curl(base_url(), name, method, body, enforced),
            "python": python(base_url(), name, method, body, enforced)}
