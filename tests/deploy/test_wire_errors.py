"""Answers no view writes (issue 17, items 8 and 9): gunicorn's own 400/414/431 refusals, a bad
chunk size and werkzeug's slash redirects come back as JSON in the route's protocol shape."""

import json
import socket

import pytest

from tests.kit import modelkit


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.conftest import start_server, stop_server

    tmp = tmp_path_factory.mktemp("wire")
    modelkit.sklearn_model(tmp / "v1", "logreg", seed=0)
    config = modelkit.bootstrap_file(tmp / "mlemu.yaml",
                                     {"m": {"versions": {"v1": {"deploymentUri": "v1"}}}})
    started = start_server(tmp / "state", config, workers=1)
    yield started
    stop_server(started.proc)


def exchange(server, raw: bytes):
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
            if b"\r\n\r\n" in received:
                head, _, body = received.partition(b"\r\n\r\n")
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(body) >= length[0]:
                    break
    head, _, body = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    assert b"content-type: application/json" in head.lower(), received
    return status, json.loads(body)


def test_request_line_too_long_is_414_json(server):
    status, body = exchange(server, b"GET /v2/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 414
    assert "URI Too Long" in body["error"]


def test_headers_too_large_are_431_in_the_google_shape_under_v1(server):
    headers = b"".join(b"X-%d: v\r\n" % i for i in range(150))
    status, body = exchange(server, b"GET /v1/projects/p/models HTTP/1.1\r\nHost: x\r\n" + headers
                            + b"\r\n")
    assert status == 431
    assert body["error"]["code"] == 431 and body["error"]["status"] == "INVALID_ARGUMENT"


def test_bad_header_is_400_in_the_grps_shape_under_grps(server):
    status, body = exchange(server, b"GET /grps/v1/health/live HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n")
    assert status == 400
    assert body["status"]["code"] == 400 and body["status"]["status"] == "FAILURE"


def test_bad_chunk_size_is_400(server):
    status, body = exchange(server, b"POST /v1/projects/p/models/m:predict HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"zz\r\n{}\r\n0\r\n\r\n")
    assert status == 400
    assert body["error"]["status"] == "INVALID_ARGUMENT"
    assert "chunk" in body["error"]["message"].lower()


def test_conflicting_lengths_and_huge_chunks_are_400_at_once(server):
    """Framings that can only be refused are answered 400 at once, not 408 at the request
    deadline (60 s): two Content-Length headers, Content-Length with chunked, and a chunk that
    declares more bytes than any route accepts (the client then sends nothing more). The
    exchange's 30 s socket timeout would fail the test first."""
    head = b"POST /v1/projects/p/models/m:predict HTTP/1.1\r\nHost: x\r\n"
    for framing in (b"Content-Length: 2\r\nContent-Length: 200\r\n\r\n{}",
                    b"Content-Length: 200\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
                    b"Transfer-Encoding: chunked\r\n\r\nffffffffffff\r\n{}"):
        status, body = exchange(server, head + framing)
        assert status == 400, framing
        assert body["error"]["status"] == "INVALID_ARGUMENT"
    status, body = exchange(server, b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n" + b"9" * 30 + b"\r\n")
    assert status == 400 and "exceeds the limit" in body["error"]


def test_double_slash_is_not_redirected(server):
    status, body = exchange(server, b"POST /v2/models//infer HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: 2\r\n\r\n{}")
    assert status == 404
    assert "error" in body
