"""deploy/connection_socket.py: a connection's socket skips mode changes that change nothing and
sends a response's writes together, in order. End to end: a one-row answer leaves the server as
one write."""

import email.utils
import fcntl
import http.client
import json
import os
import socket
import time

import pytest

from deploy.connection_socket import CORK_LIMIT, ConnectionSocket
from tests.kit import modelkit


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    ours = ConnectionSocket.adopt(ours)
    theirs.settimeout(10)
    yield ours, theirs
    ours.close()
    theirs.close()


def nonblocking(sock):
    return bool(fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK)


def pending(sock):
    """What the peer has received so far, without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1 << 20)
    except BlockingIOError:
        return b""
    finally:
        sock.settimeout(10)


def receive(sock, size):
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    return data


def test_adopt_keeps_the_connection_and_its_mode(pair):
    ours, theirs = pair
    assert ours.gettimeout() is None and not nonblocking(ours)
    theirs.sendall(b"ping")
    assert ours.recv(4) == b"ping"


def test_a_mode_change_that_changes_nothing_makes_no_call(pair):
    ours, _ = pair
    # Make the descriptor non-blocking behind Python's back: a setblocking(True) that reached the
    # kernel would undo it; one Python knows to be a no-op does not.
    fcntl.fcntl(ours.fileno(), fcntl.F_SETFL, fcntl.fcntl(ours.fileno(), fcntl.F_GETFL) | os.O_NONBLOCK)
    ours.setblocking(True)
    ours.settimeout(None)
    assert nonblocking(ours)
    ours.setblocking(False)  # a real change goes through
    assert ours.gettimeout() == 0.0 and nonblocking(ours)
    ours.settimeout(2.5)
    assert ours.gettimeout() == 2.5
    ours.setblocking(True)
    assert ours.gettimeout() is None and not nonblocking(ours)


def test_corked_writes_leave_together_at_uncork(pair):
    ours, theirs = pair
    ours.cork()
    ours.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    ours.sendall(memoryview(b"body"))
    assert pending(theirs) == b""
    ours.uncork()
    assert theirs.recv(1024) == b"HTTP/1.1 200 OK\r\n\r\nbody"
    ours.sendall(b"after")  # uncorked: written through
    assert theirs.recv(1024) == b"after"


def test_a_large_write_sends_what_was_collected_first(pair):
    ours, theirs = pair
    big = bytes(range(256)) * (CORK_LIMIT // 128)
    ours.cork()
    ours.sendall(b"head")
    ours.sendall(big)  # larger than the limit: head then big, now
    assert receive(theirs, 4 + len(big)) == b"head" + big
    ours.sendall(b"tail")
    assert pending(theirs) == b""
    ours.uncork()
    assert theirs.recv(1024) == b"tail"


def test_send_and_sendfile_send_what_was_collected_first(pair, tmp_path):
    ours, theirs = pair
    ours.cork()
    ours.sendall(b"a")
    assert ours.send(b"b") == 1
    assert receive(theirs, 2) == b"ab"
    path = tmp_path / "file"
    path.write_bytes(b"file contents")
    ours.sendall(b"c")
    with path.open("rb") as file:
        ours.sendfile(file)
    assert receive(theirs, 14) == b"cfile contents"
    ours.uncork()
    assert pending(theirs) == b""


@pytest.fixture
def server(tmp_path, live_server):
    modelkit.sklearn_model(tmp_path / "v1", "logreg", seed=0)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml",
                                     {"m": {"versions": {"v1": {"deploymentUri": "v1"}}}})
    return live_server(config, workers=1)


def test_a_small_answer_is_one_write_and_a_large_one_is_whole(server):
    host, port = server.url.removeprefix("http://").split(":")
    body = json.dumps({"instances": [[1.0, 2.0, 0.5, -1.0]]}).encode()
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        for _ in range(3):  # on a fresh and on kept-alive connections alike
            sock.sendall(b"POST /v1/projects/p/models/m:predict HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))
            # The head and the body were sent by one call: the first read has both.
            answer = sock.recv(65536)
            head, _, rest = answer.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            assert head.startswith(b"HTTP/1.1 200 OK") and len(rest) == length
            assert json.loads(rest) == {"predictions": [json.loads(rest)["predictions"][0]]}
            date = next(line for line in head.split(b"\r\n") if line.startswith(b"Date: "))
            assert abs(email.utils.parsedate_to_datetime(date[6:].decode()).timestamp()
                       - time.time()) < 5
    many = {"instances": [[1.0, 2.0, 0.5, -1.0]] * 50000}  # an answer far over the cork limit
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", "/v1/projects/p/models/m:predict", json.dumps(many),
                 {"Content-Type": "application/json"})
    answer = conn.getresponse()
    data = answer.read()
    assert answer.status == 200 and len(data) > CORK_LIMIT
    assert len(json.loads(data)["predictions"]) == 50000
    conn.close()
