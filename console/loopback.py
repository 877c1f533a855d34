"""The console's calls to mlemu's own HTTP APIs, made in process through the app's WSGI stack.

What the console shows for "try it", the emulator controls (`/_mlemu/`) and the Vertex AI lists
is what those APIs answer, through the same routes, credentials check, error shapes, metrics and
journal as a client's request; no socket, no port to know. Each call runs in an empty
`contextvars.Context`: Flask's request and app contexts, the caller cached on `flask.g` and
observability's request context are context variables, so the inner request shares none of the
console request's (its own credentials are verified afresh).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from werkzeug.datastructures import Headers
from werkzeug.test import EnvironBuilder, run_wsgi_app

WsgiApp = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str

    def json(self) -> Any:
        """The body as JSON (None when it is not JSON)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def call(app: WsgiApp, method: str, path: str, *, headers: dict[str, str] | None = None,
         query: dict[str, str] | None = None, body: bytes | None = None,
         content_type: str = "application/json") -> Answer:
    """`method path` answered by `app` (the outermost WSGI callable: Flask.wsgi_app after every
    middleware), as if a client on 127.0.0.1 had sent it."""
    builder = EnvironBuilder(path=path, method=method, headers=Headers(headers or {}), query_string=query,
                             data=body, content_type=content_type if body is not None else None,
                             environ_base={"REMOTE_ADDR": "127.0.0.1"})
    environ = builder.get_environ()
    builder.close()

    def run() -> Answer:
        iterable, status, response_headers = run_wsgi_app(app, environ, buffered=True)
        try:
            data = b"".join(iterable)
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()
        return Answer(int(status.split(" ", 1)[0]), data,
                      response_headers.get("Content-Type", ""))

    return contextvars.Context().run(run)
