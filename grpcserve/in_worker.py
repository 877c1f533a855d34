"""gRPC served inside a gunicorn worker process: `app.py serve`'s default layout.

Each gunicorn worker, once its app is built, starts grpc.aio's server (grpcserve/server.py) on
its own thread and event loop over the worker's own Emulator: the same Deployments, the same
loaded predictors and batchers as the worker's HTTP requests. So a model is loaded once per
process, and concurrent one-row calls of both transports to one model merge in one batcher.
Every worker binds the gRPC port with SO_REUSEPORT and the kernel spreads connections over them
(gRPC core sets the option from `grpc.so_reuseport`: grpc/grpc
src/core/lib/iomgr/tcp_server_utils_posix_common.cc); `serve` made sure beforehand that nobody
else listens there (cli/preflight.py). A worker gunicorn starts in place of a dead one binds it
again, beside its siblings.

SIGTERM stops gRPC with HTTP: new calls are refused at once and calls in flight get what is left
of gunicorn's graceful_timeout (the master kills the worker at its end), then are cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from typing import TYPE_CHECKING

from grpcserve.server import GRACE_S, GrpcServer

if TYPE_CHECKING:
    from emulator import Emulator

log = logging.getLogger("mlemu.grpc")


class WorkerGrpc:
    """One worker's gRPC server: started with the worker, stopped with it."""

    def __init__(self, emu: Emulator, grace: float = GRACE_S) -> None:
        """Bind and start (RuntimeError naming the cause when the port cannot be bound);
        `grace`: seconds calls in flight get after a stop begins."""
        self.grace = grace
        self.server = GrpcServer(emu, reuse_port=True)
        self.server.start()
        self.port = self.server.port
        self._stopping: concurrent.futures.Future[None] | None = None
        settings = emu.settings
        log.info("gRPC (V2 GRPCInferenceService, grps GrpsService) listening on %s:%d in "
                 "worker %d", settings.host, self.port, os.getpid())

    def begin_stop(self) -> None:
        """Refuse new calls from now on; calls in flight get `grace` seconds. Returns at once
        (the worker's main loop drains HTTP meanwhile); a second call does nothing."""
        if self._stopping is None:
            self._stopping = asyncio.run_coroutine_threadsafe(
                self.server.server.stop(self.grace), self.server.loop)

    def finish(self, timeout: float) -> None:
        """Wait (at most `timeout` s) for the stop begun by `begin_stop`, beginning it if
        nobody did (a worker leaving without SIGTERM), then end the server's loop and pool."""
        self.begin_stop()
        assert self._stopping is not None
        try:
            self._stopping.result(timeout=max(0.0, timeout))
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            log.warning("gRPC calls still running as worker %d exits", os.getpid())
        self.server.loop.call_soon_threadsafe(self.server.loop.stop)
        self.server.pool.shutdown(wait=False, cancel_futures=True)

