"""Slow clients (issue 17): sockets that send part of a request and go silent hold no thread, are
answered 408 and closed at their deadline, and never keep well-behaved clients waiting."""

import json
import select
import socket

import pytest
import requests

from tests.kit import modelkit

BODY = json.dumps({"instances": [[1.0, 2.0, 0.5, -1.0]]}).encode()
PATH = "/v1/projects/p/models/m:predict"
HALF_OPEN = 200


@pytest.fixture
def serve(tmp_path, live_server):
    modelkit.sklearn_model(tmp_path / "v1", "logreg", seed=0)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml",
                                     {"m": {"versions": {"v1": {"deploymentUri": "v1"}}}})

    def start(**env):
        # One process, 2 threads: two stalled requests would be enough to block it.
        return live_server(config, workers=1, env={"MLEMU_THREADS": "2", **env})

    return start


def address(server):
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def half_open(server, kind):
    sock = socket.create_connection(address(server), timeout=60)
    if kind == "headers":  # request line and part of the headers, never the blank line
        sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Ty".encode())
    elif kind == "short body":
        sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY[:5])
    elif kind == "chunked":  # a chunked body whose last chunk never comes
        sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"ins\r\n".encode())
    return sock


def still_open(sock):
    """Neither answered nor closed by the server (nothing to read yet)."""
    sock.setblocking(False)
    try:
        sock.recv(1)  # an answer or the end of the stream: the server let go of this request
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
    return False


def test_half_open_sockets_do_not_block_well_behaved_clients(serve):
    server = serve(MLEMU_HEADER_TIMEOUT="300", MLEMU_REQUEST_TIMEOUT="300")
    kinds = ("headers", "short body", "chunked")
    held = [half_open(server, kinds[i % 3]) for i in range(HALF_OPEN)]
    try:
        with requests.Session() as session:
            for _ in range(20):
                answer = session.post(server.url + PATH, data=BODY, timeout=30,
                                      headers={"Content-Type": "application/json"})
                assert (answer.status_code, answer.json()) == (200, {"predictions": [1]})
        for _ in range(5):  # new connections too
            answer = requests.post(server.url + PATH, data=BODY, timeout=30,
                                   headers={"Content-Type": "application/json"})
            assert answer.status_code == 200
        # ... answered while every stalled request was still held open by the server.
        assert all(still_open(sock) for sock in held)
    finally:
        for sock in held:
            sock.close()


def read_until_closed(sock):
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@pytest.mark.parametrize("kind", ["headers", "short body", "chunked"])
def test_stalled_requests_are_answered_408_and_closed_at_their_deadline(serve, kind):
    server = serve(MLEMU_HEADER_TIMEOUT="1", MLEMU_REQUEST_TIMEOUT="2")
    sock = half_open(server, kind)
    with sock:
        answer = read_until_closed(sock)  # the socket's own 60 s timeout bounds the wait
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    error = json.loads(body)["error"]
    assert error["status"] == "DEADLINE_EXCEEDED"
    assert "did not arrive within the server's time limit" in error["message"]


def test_a_trickling_client_gets_one_deadline_for_the_request(serve):
    # One header byte every 0.3 s would reset a per-read timeout forever.
    server = serve(MLEMU_HEADER_TIMEOUT="1", MLEMU_REQUEST_TIMEOUT="1")
    request = f"POST {PATH} HTTP/1.1\r\nHost: x\r\n" + "X-Pad: " + "a" * 200
    with socket.create_connection(address(server), timeout=60) as sock:
        sent = 0
        for byte in request.encode():
            if select.select([sock], [], [], 0.3)[0]:  # the server answered: stop sending
                break
            sock.sendall(bytes([byte]))
            sent += 1
        assert sent < len(request)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")
