"""MLEMU_WORKER_OFF (deploy/tuning.py): each of the worker's optimizations switched off is
gthread's own behaviour for that part, decided on the real worker class without a running
server; and a server with every one of them off serves :predict correctly."""

from __future__ import annotations

import http.client
import json
import os
import selectors
import socket
import subprocess
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from gunicorn.config import Config
from gunicorn.http.body import Body, LengthReader

from core.settings import Settings
from deploy.connection_board import ConnectionBoard
from deploy.connection_socket import ConnectionSocket
from deploy.tuning import WorkerTuning
from deploy.worker import KeepAliveThreadWorker
from tests.deploy.test_sizing import load_conf
from tests.kit import modelkit

ROOT = Path(__file__).resolve().parents[2]


def test_without_switches_off_exactly_the_named_ones() -> None:
    assert WorkerTuning.without(()) == WorkerTuning()
    tuning = WorkerTuning.without(Settings.from_env({"MLEMU_WORKER_OFF": "Drain, pinning"}).worker_off)
    assert (tuning.pinning, tuning.board, tuning.socket, tuning.drain) == (False, True, True,
                                                                          False)
    every = WorkerTuning.without(Settings.from_env({"MLEMU_WORKER_OFF": "all"}).worker_off)
    assert not any(vars(every).values())
    with pytest.raises(ValueError, match="unknown worker optimizations: pining"):
        WorkerTuning.without(("pining",))


def worker(off: str, threads: int = 2) -> Any:
    """The real worker class, configured as its init_process does, without its main loop."""
    cfg = Config()
    cfg.set("threads", threads)
    made = KeepAliveThreadWorker(1, 1, [], None, 30, cfg, mock.Mock())
    made.configure(Settings.from_env({"MLEMU_WORKER_OFF": off}))
    made.poller = selectors.DefaultSelector()
    return made


def test_pinning_off_hands_every_kept_alive_connection_back_to_the_poller() -> None:
    conn = types.SimpleNamespace(is_http2=False)
    on, off = worker("none"), worker("pinning")
    for w in (on, off):
        w.nr_conns = 1
    assert on._may_keep(conn)
    assert not off._may_keep(conn)  # gthread's finish_request then parks it in the poller
    assert worker("board,socket,drain")._may_keep(conn)


def accepted_socket(w: Any) -> socket.socket:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=10)
        try:
            w.accept(listener)
            (conn,) = w.reading
            sock: socket.socket = conn.sock
            sock.close()
        finally:
            client.close()
    return sock


def test_socket_off_serves_on_the_plain_accepted_socket() -> None:
    assert type(accepted_socket(worker("none"))) is ConnectionSocket
    assert type(accepted_socket(worker("socket"))) is socket.socket


def test_drain_off_drains_a_body_read_to_its_end_as_gthread_does() -> None:
    def conn() -> Any:
        body = Body(LengthReader(None, 0))  # a Content-Length body read to its end
        parser = mock.Mock(mesg=types.SimpleNamespace(body=body))
        parser.finish_body.return_value = True
        return types.SimpleNamespace(parser=parser)

    skipped, drained = conn(), conn()
    assert worker("none")._keepalive_after(skipped, True) is True
    skipped.parser.finish_body.assert_not_called()
    assert worker("drain")._keepalive_after(drained, True) is True
    drained.parser.finish_body.assert_called_once()  # gthread's drain, under its deadline


def test_board_off_gives_the_worker_no_board(monkeypatch: pytest.MonkeyPatch) -> None:
    for env, boarded in (({}, True), ({"MLEMU_WORKER_OFF": "board"}, False)):
        conf = load_conf(monkeypatch, env, cpus=2)
        forked = types.SimpleNamespace()
        conf["pre_fork"](types.SimpleNamespace(WORKERS={}), forked)
        assert isinstance(getattr(forked, "mlemu_board", None), ConnectionBoard) is boarded
        assert getattr(forked, "mlemu_slot", None) == (0 if boarded else None)


def test_a_server_with_every_optimization_off_answers_predict(tmp_path: Path,
                                                              live_server: Any) -> None:
    model = modelkit.sklearn_model(tmp_path / "v1", "logreg", seed=0)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml",
                                     {"m": {"versions": {"v1": {"deploymentUri": "v1"}}}})
    server = live_server(config, workers=2, env={"MLEMU_WORKER_OFF": "all", "MLEMU_THREADS": "2"})
    host, port = server.url.removeprefix("http://").split(":")
    rows = modelkit.training_data()[0][:12].tolist()
    want = model.predict(rows).tolist()
    conns = [http.client.HTTPConnection(host, int(port), timeout=60) for _ in range(3)]
    for _ in range(3):  # kept-alive connections, more than a worker's threads
        for i, conn in enumerate(conns):
            chunk = rows[4 * i:4 * i + 4]
            conn.request("POST", "/v1/projects/p/models/m:predict",
                         json.dumps({"instances": chunk}), {"Content-Type": "application/json"})
            answer = conn.getresponse()
            assert answer.status == 200
            assert answer.getheader("Date")
            assert json.loads(answer.read()) == {"predictions": want[4 * i:4 * i + 4]}
    for conn in conns:
        conn.close()
    assert "Traceback" not in server.output()


def test_serve_names_an_unknown_optimization_in_one_line() -> None:
    env = {**os.environ, "MLEMU_WORKER_OFF": "drain,pining"}
    done = subprocess.run([sys.executable, str(ROOT / "app.py"), "serve"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("Error: MLEMU_WORKER_OFF: 'pining' is not one of 'pinning', 'board', "
                           "'socket', 'drain', 'all', 'none'\n")
