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


def both_workers_up(url: str) -> None:
    """Until both workers answer (the server is ready as soon as one is)."""
    seen = set()
    for _ in range(200):
        conn = connect(url)
        seen.add(serving_pid(conn))
        conn.close()
        if len(seen) == 2:
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
