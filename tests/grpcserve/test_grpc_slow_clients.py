"""Slow gRPC clients (issue 17): calls that send their headers and part of a request message hold
no thread, so well-behaved calls are still served (grpc's threaded server gave each such call a
pool thread that waited for the message; grpcserve.server.GrpcServer receives it in an event loop)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from core.settings import Settings
from protocols.proto_modules import grpc_predict_v2_pb2 as pb
from protocols.proto_modules import grpc_predict_v2_pb2_grpc, grps_pb2, grps_pb2_grpc

STALLED_CALLS = 40  # the pool below has 4 threads


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame (RFC 9113 section 4.1)."""
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header field without indexing, no Huffman coding (RFC 7541 6.2.2)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def stalled_calls(port: int, count: int) -> socket.socket:
    """One connection with `count` ModelInfer calls, each sending 10 of the 100 message bytes it
    announces and then nothing."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))  # preface + SETTINGS
    headers = b"".join(literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"x"),
        (b":path", b"/inference.GRPCInferenceService/ModelInfer"),
        (b"content-type", b"application/grpc"), (b"te", b"trailers")))
    for index in range(count):
        stream = 1 + 2 * index
        sock.sendall(frame(1, 0x4, stream, headers))  # HEADERS, END_HEADERS, no END_STREAM
        sock.sendall(frame(0, 0, stream, b"\x00" + struct.pack(">I", 100) + b"0123456789"))
    return sock


@pytest.fixture
def server(tmp_path: Path) -> Iterator[int]:
    from boot import build_emulator
    from grpcserve.server import build_server

    emu = build_emulator(Settings(state_dir=tmp_path / "state", threads=4), warm=False)
    started, port = build_server(emu, port=0)
    started.start()
    yield port
    started.stop(None)


def test_stalled_calls_do_not_block_well_behaved_ones(server: int) -> None:
    held = [stalled_calls(server, STALLED_CALLS // 4) for _ in range(4)]
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server}") as channel:
            v2 = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(channel)
            grps = grps_pb2_grpc.GrpsServiceStub(channel)
            for _ in range(10):
                assert v2.ServerLive(pb.ServerLiveRequest(), timeout=30).live
                assert grps.CheckLiveness(grps_pb2.GrpsMessage(), timeout=30).status.code == 200
    finally:
        for sock in held:
            sock.close()
