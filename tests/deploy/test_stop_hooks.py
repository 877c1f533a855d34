"""deploy/gunicorn.conf.py's stop hooks: a worker told to stop before it could handle SIGTERM
(the master stopping while it was still starting workers) stops listening, for HTTP and gRPC,
as soon as it can."""

from __future__ import annotations

import os
import queue
import runpy
import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

GUNICORN_CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def _worker() -> tuple[SimpleNamespace, list[int], list[Any]]:
    exits: list[int] = []
    deferred: list[Any] = []
    worker = SimpleNamespace(handle_exit=lambda sig, frame: exits.append(sig),
                             method_queue=SimpleNamespace(defer=lambda fn, *args: deferred.append(fn)))
    return worker, exits, deferred


def test_a_sigterm_before_the_workers_handlers_still_stops_it(monkeypatch: Any) -> None:
    monkeypatch.setenv("MLEMU_GRPC_PORT", "0")  # these stand-in workers have no app to serve
    conf = runpy.run_path(str(GUNICORN_CONF))
    stops = [conf["_stop_listening"], conf["_stop_grpc"]]  # HTTP listeners, then gRPC
    previous = signal.getsignal(signal.SIGTERM)
    try:
        # Queued by the master's handler, copied by fork: found in the worker's copy.
        server = SimpleNamespace(SIG_QUEUE=queue.SimpleQueue())
        server.SIG_QUEUE.put_nowait(signal.SIGCHLD)
        server.SIG_QUEUE.put_nowait(signal.SIGTERM)
        worker, exits, deferred = _worker()
        conf["post_fork"](server, worker)
        conf["post_worker_init"](worker)
        assert exits == [signal.SIGTERM] and deferred == stops

        # Arriving between the fork and gunicorn's own handlers: noted, then acted on.
        worker, exits, deferred = _worker()
        conf["post_fork"](SimpleNamespace(SIG_QUEUE=queue.SimpleQueue()), worker)
        assert worker.mlemu_stop_early is False
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not worker.mlemu_stop_early and time.monotonic() < deadline:
            time.sleep(0.01)
        conf["post_worker_init"](worker)
        assert exits == [signal.SIGTERM] and deferred == stops

        # Not told to stop: a worker that starts normally keeps serving.
        worker, exits, deferred = _worker()
        conf["post_fork"](SimpleNamespace(SIG_QUEUE=queue.SimpleQueue()), worker)
        conf["post_worker_init"](worker)
        assert exits == [] and deferred == []
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_dead_workers_metrics_the_master_cannot_remove_do_not_stop_it(
        tmp_path: Path, monkeypatch: Any) -> None:
    """child_exit on a metrics directory it may not change (read-only, or gone) logs a warning
    instead of raising in the master (where it would end the server)."""
    from prometheus_client import multiprocess

    conf = runpy.run_path(str(GUNICORN_CONF))
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    def refuse(pid: int) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / f"gauge_livesum_{pid}.db"))

    monkeypatch.setattr(multiprocess, "mark_process_dead", refuse)
    warnings: list[str] = []
    server = SimpleNamespace(log=SimpleNamespace(warning=lambda msg, *args: warnings.append(
        msg % args)))
    conf["child_exit"](server, SimpleNamespace(pid=4321, mlemu_slot=None))
    assert len(warnings) == 1 and "4321" in warnings[0] and "Permission denied" in warnings[0]
