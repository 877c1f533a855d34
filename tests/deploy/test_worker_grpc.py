"""deploy/gunicorn.conf.py's gRPC hooks, on stand-in workers holding a real Emulator: a worker
starts its gRPC server once its app is built, stops listening when told to stop, and a port it
cannot bind ends it with gunicorn's boot-error status and one line saying why."""

from __future__ import annotations

import runpy
import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from tests.conftest import free_port

GUNICORN_CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def _worker(emu: Any, errors: list[str]) -> SimpleNamespace:
    deferred: list[Any] = []
    return SimpleNamespace(
        wsgi=SimpleNamespace(extensions={"mlemu": emu}), cfg=SimpleNamespace(graceful_timeout=8),
        log=SimpleNamespace(error=lambda msg, *args: errors.append(msg % args)),
        handle_exit=lambda sig, frame: None, deferred=deferred, sockets=[],
        set_accept_enabled=lambda enabled: None,
        method_queue=SimpleNamespace(defer=lambda fn, *args: deferred.append((fn, args))))


def _live(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        live = channel.unary_unary("/inference.GRPCInferenceService/ServerLive",
                                   request_serializer=bytes, response_deserializer=bytes)
        return bool(live(b"", timeout=60) == b"\x08\x01")


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def conf_and_emu(tmp_path: Path, monkeypatch: Any) -> tuple[dict[str, Any], Any, int]:
    from boot import build_emulator
    from core.settings import Settings

    port = free_port()
    monkeypatch.setenv("MLEMU_GRPC_PORT", str(port))
    monkeypatch.setenv("MLEMU_HOST", "127.0.0.1")
    monkeypatch.delenv("MLEMU_GRPC_WORKERS", raising=False)
    conf = runpy.run_path(str(GUNICORN_CONF))
    emu = build_emulator(Settings.from_env().replace(state_dir=tmp_path / "state"), warm=False)
    return conf, emu, port


def test_a_worker_serves_grpc_until_it_is_told_to_stop(conf_and_emu: Any) -> None:
    import signal

    conf, emu, port = conf_and_emu
    previous = signal.getsignal(signal.SIGTERM)
    worker = _worker(emu, [])
    try:
        conf["post_worker_init"](worker)
        assert worker.mlemu_grpc is not None and _live(port)
        worker.handle_exit(signal.SIGTERM, None)  # gunicorn's handler, as wrapped by the hook
        for fn, args in worker.deferred:  # what the worker's main loop then runs
            fn(*args)
        deadline = time.monotonic() + 60  # the stop runs on the server's loop: a bound, no target
        while not _refused(port):
            assert time.monotonic() < deadline, "the gRPC port still accepts connections"
            time.sleep(0.05)
    finally:
        conf["worker_exit"](None, worker)
        signal.signal(signal.SIGTERM, previous)


def test_a_worker_that_cannot_bind_grpc_fails_to_boot_in_one_line(conf_and_emu: Any) -> None:
    import signal

    conf, emu, port = conf_and_emu
    errors: list[str] = []
    previous = signal.getsignal(signal.SIGTERM)
    with socket.socket() as taken:  # bound without SO_REUSEPORT: nobody may share it
        taken.bind(("127.0.0.1", port))
        taken.listen()
        try:
            with pytest.raises(SystemExit) as caught:
                conf["post_worker_init"](_worker(emu, errors))
        finally:
            signal.signal(signal.SIGTERM, previous)
    assert caught.value.code == 3  # gunicorn's WORKER_BOOT_ERROR: the master halts
    assert len(errors) == 1 and errors[0].startswith(f"cannot listen on 127.0.0.1:{port}: ")
