"""mlemu's gRPC server: V2 `inference.GRPCInferenceService` and grps `GrpsService` on one port.

Both services run over the same dataplane, registry and settings as the HTTP app (protocols/
v2_grpc.py, protocols/grps_grpc.py). `python app.py serve` starts this as its own process beside
gunicorn when MLEMU_GRPC_PORT is not 0 (it never forks a process that has loaded a framework);
`python grpc_server.py` runs it alone. Messages may be up to MLEMU_MAX_MESSAGE_BYTES (64 MiB by
default; gRPC's own default is 4 MiB) in both directions.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))

import grpc

from emulator import Emulator, build_emulator
from settings import Settings

log = logging.getLogger("mlemu.grpc")
#: Seconds in-flight calls get to finish on SIGTERM (Cloud Run kills 10 s after it).
GRACE_S = 8.0


def build_server(emu: Emulator, port: int | None = None) -> tuple[grpc.Server, int]:
    """A started-ready (not yet started) server and the port it is bound to."""
    from protocols._generated import grpc_predict_v2_pb2_grpc, grps_pb2_grpc
    from protocols.grps_grpc import GrpsServicer
    from protocols.v2_grpc import V2Servicer

    settings = emu.settings
    limit = settings.max_message_bytes
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max(4, settings.threads), thread_name_prefix="grpc"),
        options=[("grpc.max_receive_message_length", limit),
                 ("grpc.max_send_message_length", limit),
                 ("grpc.so_reuseport", 0)],
    )
    grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(V2Servicer(emu), server)
    grps_pb2_grpc.add_GrpsServiceServicer_to_server(GrpsServicer(emu), server)
    bound = server.add_insecure_port(f"{settings.host}:{settings.grpc_port if port is None else port}")
    return server, bound


def main() -> int:
    settings = Settings.from_env()
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    if not settings.grpc_port:
        log.error("MLEMU_GRPC_PORT is 0: gRPC is disabled")
        return 2
    emu = build_emulator(settings)
    try:
        server, port = build_server(emu)
    except RuntimeError as exc:
        log.error("cannot listen on %s:%s: %s", settings.host, settings.grpc_port, exc)
        return 1
    server.start()
    log.info("gRPC (V2 GRPCInferenceService, grps GrpsService) listening on %s:%d",
             settings.host, port)
    stopped = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping gRPC", signum)
        server.stop(GRACE_S).wait()
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    stopped.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
