"""Helpers for the data plane tests: one emulator served in this process over HTTP (werkzeug)
and gRPC (grpcserve), so a test can hold a model call and watch requests queue behind it.

`Gate` wraps a predictor class's method before a model is loaded (the deployments cache and
the batchers take the class's method when they load or make one): once armed, the next model
call waits until the test releases it, and meanwhile the requests that arrive queue in the
predictor's batcher. Nothing here measures time; the waits are bounded only so a broken build
fails instead of hanging.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.settings import Settings
from predictors.batching import KINDS

#: Longest any wait here lasts before the test fails (a deadlock, not a slow machine).
PATIENCE_S = 60.0


class Gate:
    """Holds the first call made to a wrapped method after `arm`, until `open`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = False
        self.entered = threading.Event()
        self._release = threading.Event()

    def arm(self) -> None:
        self.entered.clear()
        self._release.clear()
        with self._lock:
            self._armed = True

    def open(self) -> None:
        self._release.set()

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        gate = self

        @functools.wraps(method)
        def held(target: Any, *args: Any, **kwargs: Any) -> Any:
            with gate._lock:
                take, gate._armed = gate._armed, False
            if take:
                gate.entered.set()
                assert gate._release.wait(PATIENCE_S), "the test never opened the gate"
            return method(target, *args, **kwargs)

        return held


def queued(emu: Any, predictor: Any) -> int:
    """Requests waiting in any of the predictor's batchers."""
    batchers = emu.deployments.batchers
    return sum(b.queued() for kind in KINDS if (b := batchers.existing(predictor, kind)))


def merged_round(emu: Any, gate: Gate, predictor: Any, send: Callable[[Any], Any],
                 holder: Any, rows: list[Any]) -> list[Any]:
    """Send `holder` and hold its model call; send `rows` concurrently (one request each) and
    wait until all of them queue behind it; release; every answer, in `rows`' order."""
    answers: dict[int, Any] = {}

    def run(index: int, row: Any) -> None:
        try:
            answers[index] = send(row)
        except Exception as exc:  # reported by the assertion below
            answers[index] = exc

    gate.arm()
    first = threading.Thread(target=run, args=(-1, holder))
    first.start()
    assert gate.entered.wait(PATIENCE_S), "the holding request never reached the model"
    threads = [threading.Thread(target=run, args=(i, row)) for i, row in enumerate(rows)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + PATIENCE_S
    while queued(emu, predictor) < len(rows) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert queued(emu, predictor) == len(rows), "the requests did not queue behind the held call"
    gate.open()
    for thread in [first, *threads]:
        thread.join(PATIENCE_S)
    failed = {i: a for i, a in answers.items() if isinstance(a, Exception)}
    assert not failed, failed
    return [answers[i] for i in range(len(rows))]


def merged_metrics(emu: Any, model: str, version: str = "v1") -> tuple[float, float]:
    """(merged model calls, requests they merged) for a version, from its metrics."""
    emu.instruments.flush()
    registry = emu.instruments.registry
    labels = {"model": model, "version": version}
    count = registry.get_sample_value("mlemu_batch_merged_requests_count", labels) or 0.0
    total = registry.get_sample_value("mlemu_batch_merged_requests_sum", labels) or 0.0
    return count, total


class Served:
    """An app and its emulator, served on free ports over HTTP and gRPC."""

    def __init__(self, flask_app: Any, grpc_server: Any, grpc_port: int, http: Any) -> None:
        self.app = flask_app
        self.emu = flask_app.extensions["mlemu"]
        self.grpc_server = grpc_server
        self.grpc_target = f"127.0.0.1:{grpc_port}"
        self.http = http
        self.url = f"http://127.0.0.1:{http.server_port}"


def _bounded_input(app: Any) -> Any:
    """The app with each request body bounded by its Content-Length, as gunicorn hands it over
    (werkzeug's development server gives the socket itself, which the `:predict` fast path
    would read until the client hangs up)."""
    from werkzeug.wsgi import LimitedStream

    def bounded(environ: dict[str, Any], start_response: Any) -> Any:
        length = environ.get("CONTENT_LENGTH", "")
        if length.isdigit():
            environ["wsgi.input"] = LimitedStream(environ["wsgi.input"], int(length))
        return app(environ, start_response)

    return bounded


@contextmanager
def serve(state_dir: Path, config: Path, **changes: Any) -> Iterator[Served]:
    """create_app's app over werkzeug's threaded server and the gRPC server on its emulator
    (every gRPC call in the pool, with a thread for each concurrent call of the tests)."""
    from werkzeug.serving import make_server

    from app import create_app
    from grpcserve.server import build_server

    settings = Settings(state_dir=state_dir, config_file=config, default_project="mlemu",
                        grpc_inline_ms=0.0, threads=16, request_log_sink="store", **changes)
    flask_app = create_app(settings, warm=False)
    http = make_server("127.0.0.1", 0, _bounded_input(flask_app), threaded=True)
    loop = threading.Thread(target=http.serve_forever, daemon=True)
    loop.start()
    grpc_server, port = build_server(flask_app.extensions["mlemu"], port=0)
    grpc_server.start()
    try:
        yield Served(flask_app, grpc_server, port, http)
    finally:
        grpc_server.stop(None)
        http.shutdown()
