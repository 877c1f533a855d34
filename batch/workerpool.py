"""mlemu's Beam worker pool: Beam's public `BeamFnExternalWorkerPool` gRPC service, served in the
pipeline's process, whose workers are forked by the job's fork server (batch/forkserver.py).

A pipeline whose environment is EXTERNAL (beam:env:external:v1, with this pool's address) gets
its workers from here: for each of `direct_num_workers` the FnApiRunner's ExternalWorkerHandler
calls StartWorker with the worker's id and the runner's control and logging endpoints
(apache_beam/runners/portability/fn_api_runner/worker_handlers.py, ExternalWorkerHandler.
start_worker; it never calls StopWorker: a worker ends when the runner closes its control
stream). Beam's own pool (apache_beam/runners/worker/worker_pool_main.py) starts a new
interpreter or a thread per worker; this one forks a pre-warmed process and gives the child the
environment Beam's SubprocessSdkWorker gives a worker it spawns (apache_beam/runners/portability/
local_job_service.py), so the worker's code path from sdk_worker_main on is Beam's own.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from apache_beam.utils import thread_pool_executor
from google.protobuf import text_format

from batch.forkserver import ForkServer


class WorkerPool(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):  # type: ignore[misc]
    """StartWorker forks a worker; StopWorker kills it."""

    def __init__(self, forks: ForkServer, pipeline_options: str) -> None:
        self.forks = forks
        self.pipeline_options = pipeline_options  # JSON, as SubprocessSdkWorker passes them
        self.workers: dict[str, int] = {}

    def StartWorker(self, request: Any, context: Any = None) -> Any:  # gRPC's method name
        # No LOGGING_API_SERVICE_DESCRIPTOR: a worker forked here writes its log records to the
        # job's log itself (batch/forkserver.py), where the runner's logging service would have
        # put them, so it opens no logging stream to the runner. Beam's sdk_worker_main makes
        # its FnApiLogRecordHandler only when that variable is set (apache_beam/runners/worker/
        # sdk_worker_main.py, create_harness); the stream costs each worker a channel to wait
        # for at its start and a reader thread that wakes, and needs the GIL, while it works.
        env = {"CONTROL_API_SERVICE_DESCRIPTOR": text_format.MessageToString(
                   request.control_endpoint),
               "PIPELINE_OPTIONS": self.pipeline_options,
               "WORKER_ID": request.worker_id}
        try:
            self.workers[request.worker_id] = self.forks.fork(env)
        except RuntimeError as exc:
            return beam_fn_api_pb2.StartWorkerResponse(error=str(exc))
        return beam_fn_api_pb2.StartWorkerResponse()

    def StopWorker(self, request: Any, context: Any = None) -> Any:
        pid = self.workers.pop(request.worker_id, None)
        if pid is not None:
            with contextlib.suppress(OSError):  # already ended
                os.kill(pid, signal.SIGKILL)
        return beam_fn_api_pb2.StopWorkerResponse()


def serve(pool: WorkerPool) -> tuple[str, Any]:
    """Serve `pool` on a free local port, as worker_pool_main.py's start() does; (address,
    server)."""
    server = grpc.server(thread_pool_executor.shared_unbounded_instance())
    port = server.add_insecure_port("localhost:0")
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.start()
    return f"localhost:{port}", server
