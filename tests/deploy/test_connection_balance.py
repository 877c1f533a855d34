"""Connections spread evenly over gunicorn's workers (deploy/connection_board.py): a worker that
holds more open connections than another leaves new ones to it, so a client pool's long-lived
keep-alive connections do not pile onto one worker's GIL while the other idles."""

import http.client
import json
import time
from collections import Counter

import pytest

from deploy.connection_board import UNUSED, ConnectionBoard


def connect(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=20)


def serving_pid(conn: http.client.HTTPConnection) -> int:
    conn.request("GET", "/healthz")
    answer = conn.getresponse()
    assert answer.status == 200
    return int(json.loads(answer.read())["pid"])


def closed_by_server(url: str, timeout: float = 20.0) -> None:
    """Until the server has closed its side of every connection a client closed: none of the
    server port's sockets is left in CLOSE_WAIT (state 08 in /proc/net/tcp), so each worker has
    counted its connections down. Closing is asynchronous: without this, a connection opened
    right after a close can race the server's noticing it."""
    port = int(url.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as lines:
                for line in list(lines)[1:]:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "08":
                        waiting += 1
        if not waiting:
            return
        time.sleep(0.01)
    raise AssertionError(f"the server did not close {waiting} connection(s) the client closed")


def both_workers_up(url: str) -> None:
    """Until both workers answer (the server is ready as soon as one is)."""
    seen = set()
    for _ in range(200):
        conn = connect(url)
        seen.add(serving_pid(conn))
        conn.close()
        if len(seen) == 2:
            closed_by_server(url)  # the probes' connections are off the board
            return
        time.sleep(0.05)
    raise AssertionError(f"only worker {seen} answered")


@pytest.mark.parametrize("clients", [2, 8, 9])
def test_keep_alive_connections_are_shared_evenly_by_the_workers(live_server, clients):
    server = live_server(workers=2)
    both_workers_up(server.url)
    pool = []
    for _ in range(clients):  # one after another, as a client pool opens them
        conn = connect(server.url)
        serving_pid(conn)  # the connection is accepted and in use before the next one opens
        pool.append(conn)
    for _ in range(3):  # each connection stays with the worker that accepted it
        pids = Counter(serving_pid(conn) for conn in pool)
    assert len(pids) == 2, pids
    assert max(pids.values()) - min(pids.values()) <= 1, pids
    for conn in pool:
        conn.close()


def test_a_closed_connection_makes_room_on_its_worker(live_server):
    server = live_server(workers=2)
    both_workers_up(server.url)
    pool = [connect(server.url) for _ in range(4)]
    pids = [serving_pid(conn) for conn in pool]
    assert sorted(Counter(pids).values()) == [2, 2]
    # Close both connections of one worker: the next two go to it.
    emptied = pids[0]
    for conn, pid in zip(pool, pids, strict=True):
        if pid == emptied:
            conn.close()
    closed_by_server(server.url)
    fresh = [connect(server.url) for _ in range(2)]
    assert [serving_pid(conn) for conn in fresh] == [emptied, emptied]
    for conn in pool + fresh:
        conn.close()


def test_board_counts_only_live_workers():
    board = ConnectionBoard(slots=4)
    assert board.claim(set()) == 0
    assert board.claim({0}) == 1
    a, b = 0, 1
    assert not board.others_hold_fewer(a, 5)  # b has not started: nobody to leave it to
    board.publish(b, 0)
    board.publish(a, 1)
    assert board.others_hold_fewer(a, 1)
    assert not board.others_hold_fewer(b, 0)
    board.release(b)  # stopping or exited
    assert not board.others_hold_fewer(a, 1)
    assert board.claim({0, 1, 2, 3}) is None  # full: that worker accepts as stock gunicorn does
    assert board.claim({0}) == 1
    assert UNUSED == -1
