"""deploy/worker.py under a real gunicorn: busy keep-alive connections stay on their thread, and
nothing that gthread guarantees is lost (fair turns past the thread count, pipelining, idle and
closed connections)."""

import http.client
import json
import socket

import pytest

from tests.kit import modelkit

ROW = [1.0, 2.0, 0.5, -1.0]
BODY = json.dumps({"instances": [ROW]}).encode()
PATH = "/v1/projects/p/models/m:predict"


@pytest.fixture
def server(tmp_path, live_server):
    modelkit.sklearn_model(tmp_path / "v1", "logreg", seed=0)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml",
                                     {"m": {"versions": {"v1": {"deploymentUri": "v1"}}}})
    # One process with 2 threads: a third connection only gets served if no thread keeps its
    # connection to itself.
    return live_server(config, workers=1, env={"MLEMU_THREADS": "2"})


def connect(server, timeout=20):
    host, port = server.url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def predict(conn):
    conn.request("POST", PATH, BODY, {"Content-Type": "application/json"})
    answer = conn.getresponse()
    return answer.status, json.loads(answer.read())


def test_busy_connections_are_served_in_turn_and_idle_ones_hold_no_thread(server):
    # Two clients keep their connections open and idle after a request, so each could keep a
    # thread; both threads must still serve a third and fourth client that arrive later.
    idle = [connect(server) for _ in range(2)]
    for conn in idle:
        assert predict(conn) == (200, {"predictions": [1]})
    late = [connect(server) for _ in range(2)]
    for _ in range(20):  # more connections than threads, all busy: they take turns
        for conn in late + idle:
            assert predict(conn) == (200, {"predictions": [1]})
    for conn in late + idle:
        conn.close()


def test_many_requests_on_one_connection(server):
    conn = connect(server)
    for _ in range(200):
        assert predict(conn) == (200, {"predictions": [1]})
    conn.close()


def test_pipelined_requests_are_all_answered(server):
    host, port = server.url.removeprefix("http://").split(":")
    request = (f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request * 3)  # three requests in one write: the 2nd and 3rd are read ahead
        received = b""
        while received.count(b'{"predictions":[1]}') < 3:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {received!r}"
            received += chunk
    assert received.count(b"HTTP/1.1 200 OK") == 3


def test_a_client_that_hangs_up_mid_connection_does_not_disturb_the_others(server):
    host, port = server.url.removeprefix("http://").split(":")
    for _ in range(5):
        with socket.create_connection((host, int(port)), timeout=20) as sock:
            sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(BODY)}"
                         f"\r\n\r\n".encode() + BODY)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        # closed right after its answer, while its thread may be waiting for the next request
    conn = connect(server)
    assert predict(conn) == (200, {"predictions": [1]})
    conn.close()
    assert "Traceback" not in server.output()
