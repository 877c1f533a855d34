"""mlemu's gRPC server: V2 `inference.GRPCInferenceService`, grps `GrpsService` and Vertex AI's
`PredictionService` (protocols/vertex_grpc.py) on one port.

Both services run over the same dataplane, registry and settings as the HTTP app (protocols/
v2_grpc.py, protocols/grps_grpc.py). `python app.py serve` runs one inside each gunicorn worker
over that worker's Emulator (grpcserve/in_worker.py), or, with MLEMU_GRPC_WORKERS, that many
processes of their own beside gunicorn (`main`; they are exec'd, never forked from a process that
has loaded a framework); `python -m grpcserve` runs one alone. Messages may be up to
MLEMU_MAX_MESSAGE_BYTES (64 MiB by default; gRPC's own default is 4 MiB) in both directions.

One process serves gRPC on one core at a time (the GIL), so several processes serve it, binding
the same port with SO_REUSEPORT (`reuse_port`, `--reuse-port`): the kernel spreads connections
over them. Alone, or without the flag, the port is bound exclusively and a port in use fails the
start (`serve` checks the port before sharing it: cli/preflight.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Coroutine
from concurrent import futures
from types import FrameType
from typing import Any

import grpc

from boot import build_emulator, configure_logging
from core.errors import ApiError
from core.settings import Settings
from emulator import Emulator
from grpcserve import malformed
from grpcserve.dispatch import Dispatcher, Meter
from observability.grpc import Observer

log = logging.getLogger("mlemu.grpc")
#: Seconds in-flight calls get to finish on SIGTERM (Cloud Run kills 10 s after it).
GRACE_S = 8.0


def connection_limits(settings: Settings) -> list[tuple[str, int]]:
    """gRPC core's bounds on slow or vanished clients (channel arguments, grpc/include/grpc/impl/
    channel_arg_names.h): a connection must finish its HTTP/2 handshake within the header
    timeout (core's default is 120 s), an idle one is closed after the HTTP keep-alive time,
    keepalive pings find peers that vanished without closing, and a connection is closed after
    max(5 min, the request timeout) with the request timeout as the grace for calls in flight."""
    request_ms = int(settings.request_timeout * 1000)
    return [("grpc.server_handshake_timeout_ms", int(settings.header_timeout * 1000)),
            ("grpc.max_connection_idle_ms", 120_000),
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.max_connection_age_ms", max(request_ms, 300_000)),
            ("grpc.max_connection_age_grace_ms", request_ms)]


class GrpcServer:
    """grpc.aio's server, on an event loop of its own thread, serving the (synchronous) servicers
    in a thread pool.

    Why asyncio: grpc's threaded server (grpc/_server.py `_unary_request`) gives a call
    a pool thread as soon as its headers arrive, and that thread then waits for the request
    message: 20 calls that send their headers and part of a message held all 8 threads, and
    well-behaved calls timed out. grpc.aio receives the message in the event loop and only then
    runs the handler in the pool (its `migration_thread_pool`), as deploy/worker.py does for HTTP.
    """

    def __init__(self, emu: Emulator, port: int | None = None, *,
                 reuse_port: bool = False, meter: Meter | None = None) -> None:
        settings = emu.settings
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="grpc-loop", daemon=True)
        self._thread.start()
        self.pool = futures.ThreadPoolExecutor(max_workers=settings.grpc_threads(),
                                               thread_name_prefix="grpc")
        self.dispatcher = Dispatcher(self.pool, settings.grpc_inline_ms / 1000, meter=meter)
        try:
            self.server, self.port = self._run(self._build(emu, port, reuse_port))
        except BaseException:
            self.loop.call_soon_threadsafe(self.loop.stop)
            raise

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _build(self, emu: Emulator, port: int | None,
                     reuse_port: bool) -> tuple[Any, int]:
        from protocols import vertex_grpc
        from protocols.grps_grpc import GrpsServicer
        from protocols.proto_modules import grpc_predict_v2_pb2_grpc, grps_pb2_grpc
        from protocols.v2_grpc import V2Servicer

        settings = emu.settings
        limit = settings.max_message_bytes
        server = grpc.aio.server(
            migration_thread_pool=self.pool,
            options=[("grpc.max_receive_message_length", limit),
                     ("grpc.max_send_message_length", limit),
                     ("grpc.so_reuseport", int(reuse_port)), *connection_limits(settings)],
        )
        services = _Services()
        grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(V2Servicer(emu),
                                                                            services)
        grps_pb2_grpc.add_GrpsServiceServicer_to_server(GrpsServicer(emu), services)
        vertex = vertex_grpc.handlers(emu)  # Vertex AI PredictionService, when its SDK is there
        if vertex is not None:
            services.methods[vertex_grpc.SERVICE] = vertex
        # Always observed: the request journal (controls/) records every call.
        observer = Observer(emu.instruments, emu.controls.record)
        for service, handlers in services.methods.items():
            built = {method: _handler(service, method, handler, observer, self.dispatcher)
                     for method, handler in handlers.items()}
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, built),))
            server.add_registered_method_handlers(service, built)
        bound = server.add_insecure_port(f"{settings.host}:{settings.grpc_port if port is None else port}")
        return server, bound

    def start(self) -> None:
        self._run(self.server.start())

    def stop(self, grace: float | None) -> None:
        """Refuse new calls at once; give calls in flight `grace` seconds, then cancel them."""
        self._run(self.server.stop(grace))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.pool.shutdown(wait=False)


class _Services:
    """Stands in for the server while a generated `add_XServicer_to_server` registers a
    servicer: keeps each service's method handlers, to be wrapped once (observed, dispatched)
    before the real server gets them."""

    def __init__(self) -> None:
        self.methods: dict[str, dict[str, grpc.RpcMethodHandler]] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        """The same handlers come by name through add_registered_method_handlers."""

    def add_registered_method_handlers(self, service: str,
                                       handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.methods[service] = dict(handlers)


def _message_type(deserialize: Any) -> str:
    """The full name of the message a generated deserializer (`Message.FromString`) parses,
    or a lazy one (protocols/vertex_grpc.py) names."""
    named = getattr(deserialize, "message_type", None)
    if isinstance(named, str):
        return named
    descriptor = getattr(getattr(deserialize, "__self__", None), "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "request"))


def _handler(service: str, method: str, handler: grpc.RpcMethodHandler,
             observer: Observer | None, dispatcher: Dispatcher) -> grpc.RpcMethodHandler:
    """One method's handler as served: a request that does not parse refused INVALID_ARGUMENT
    (grpcserve/malformed.py), observed (metrics, trace context) when `observer` is set, and,
    for a unary call, run where `dispatcher` says (grpcserve/dispatch.py)."""
    message_type = _message_type(handler.request_deserializer)
    deserialize = malformed.tolerant(handler.request_deserializer)
    path = f"/{service}/{method}"
    if handler.unary_unary is not None:
        behavior = malformed.unary(handler.unary_unary, path, message_type)
        if observer is not None:
            behavior = observer.unary(behavior, service, method)
        return grpc.unary_unary_rpc_method_handler(
            dispatcher.unary(path, behavior), request_deserializer=deserialize,
            response_serializer=handler.response_serializer)
    if handler.unary_stream is not None:
        streaming = malformed.stream(handler.unary_stream, path, message_type)
        if observer is not None:
            streaming = observer.stream(streaming, service, method)
        return grpc.unary_stream_rpc_method_handler(
            streaming, request_deserializer=deserialize,
            response_serializer=handler.response_serializer)
    return handler


def build_server(emu: Emulator, port: int | None = None, *, reuse_port: bool = False,
                 meter: Meter | None = None) -> tuple[GrpcServer, int]:
    """A started-ready (not yet started) server and the port it is bound to; `meter` replaces
    the dispatcher's time readings (tests)."""
    server = GrpcServer(emu, port, reuse_port=reuse_port, meter=meter)
    return server, server.port


def main(argv: list[str] | None = None, stopping: threading.Event | None = None) -> int:
    """Serve until SIGTERM/SIGINT; `--reuse-port` shares the port with sibling processes.
    `stopping`: set by a handler the process installed before its imports (grpcserve/
    __main__.py), so a signal that arrives while it starts stops it cleanly."""
    stopping = stopping or threading.Event()
    settings = Settings.from_env()
    configure_logging(settings)
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--reuse-port"]):
        log.error("usage: python -m grpcserve [--reuse-port]")
        return 2
    if not settings.grpc_port:
        log.error("MLEMU_GRPC_PORT is 0: gRPC is disabled")
        return 2
    try:
        emu = build_emulator(settings)
    except ApiError as exc:  # an unusable store: one line naming it and the fix, no traceback
        log.error("%s", exc.message)
        return 1
    try:
        server, port = build_server(emu, reuse_port=bool(args))
    except RuntimeError as exc:
        log.error("cannot listen on %s:%s: %s", settings.host, settings.grpc_port, exc)
        return 1
    if stopping.is_set():  # told to stop while starting: never listen
        log.info("signal received while starting: gRPC not started")
        _exit_soon()
        return 0
    server.start()
    log.info("gRPC (V2 GRPCInferenceService, grps GrpsService) listening on %s:%d (pid %d)",
             settings.host, port, os.getpid())

    def stop(signum: int, frame: FrameType | None) -> None:
        # Only flag it: the handler may interrupt anything, and a second signal (the supervisor
        # forwards SIGTERM, the container runtime may send its own) must not nest a stop.
        if not stopping.is_set():
            log.info("signal %d: stopping gRPC", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping.wait(1.0):
        pass
    # New RPCs are refused at once; in-flight ones get GRACE_S, then are cancelled.
    server.stop(GRACE_S)
    # A call cancelled at the deadline whose model is still computing keeps a non-daemon pool
    # thread that interpreter exit would wait for: exit 1 s from now regardless, as gunicorn's
    # master SIGKILLs a worker past graceful_timeout. The store commits whole transactions only.
    _exit_soon()
    return 0


def _exit_soon() -> None:
    """End the process 1 s from now whatever non-daemon threads are left."""
    deadline = threading.Timer(1.0, os._exit, (0,))
    deadline.daemon = True
    deadline.start()
