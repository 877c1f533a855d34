"""mlemu's gunicorn worker: gthread, with a busy keep-alive connection served by the thread it is on.

Stock gthread (gunicorn/workers/gthread.py) hands a keep-alive connection back to its main loop
after every request: the pool thread returns, a future callback writes to the worker's wake-up
pipe, the main loop re-registers the socket with its poller, and when the next request arrives it
submits the connection to the pool again. For small requests that round trip costs about as
much GIL time as mlemu's own request handling (py-spy figures in bench/NOTES.md): with
clients that send one request after another on one connection, which is what every HTTP client
library and load balancer does, throughput is capped by the handoff, not by the model.

`KeepAliveThreadWorker` keeps such a connection in its thread for the next request, as a
thread-per-connection server would, but only while that is free:

- the next request must arrive within `PIN_WAIT_S`; an idle client goes back to the poller
  exactly as under gthread (idle connections hold no thread, and the keep-alive timeout,
  the SIGTERM drain and `Connection: close` while stopping work as before);
- every connection of the worker must be able to have a thread of its own (open connections
  <= threads); past that, connections take turns through the poller as under gthread, so none
  waits behind another that keeps sending.

Slow clients: a request is read in the worker's main loop, without a thread, until it
is complete (deploy/request_buffer.py), under a per-request deadline (MLEMU_HEADER_TIMEOUT,
MLEMU_REQUEST_TIMEOUT); one that misses it is answered 408 and closed. Stock gthread gives a thread
to a connection as soon as its first byte arrives, and that thread then blocks until the client
finishes its headers and body, however long that takes: a few dozen clients that send half a
request held every thread. What the thread still reads itself (a body larger than the buffer's
bound) is read under the same deadline (DeadlineSocket). gunicorn's own error pages (400, 414,
431, ...: gunicorn/workers/base.py `handle_error`, gunicorn/util.py `write_error`) are HTML: they
are answered in the protocol's JSON shape instead (deploy/wire_errors.py).

Even connections across workers: all workers accept from one socket, and the kernel's
split of a few long-lived connections is often uneven, which leaves one worker's GIL saturated
while the other's CPU idles. Before accepting, a worker that holds more connections than the least
busy live worker leaves the connection to that one for up to `YIELD_WAIT_S`
(deploy/connection_board.py has the measurements).

Fewer system calls per request (a shorter latency tail): each accepted connection's socket skips
mode changes that change nothing and sends a response's head and body together
(deploy/connection_socket.py), and a body read to its end is not drained again.

Everything else (parsing, limits, HTTP/2, logging) is gthread's own code.
"""

from __future__ import annotations

import contextlib
import errno
import select
import selectors
import socket
import threading
import time
from functools import partial
from typing import Any

from gunicorn import util
from gunicorn.http.body import LengthReader
from gunicorn.workers.gthread import STOP_KEEPALIVE_LINGER, TConn, ThreadWorker

from core.settings import Settings
from deploy import http_date, request_target, wire_errors
from deploy.connection_board import ConnectionBoard
from deploy.connection_socket import ConnectionSocket
from deploy.request_buffer import RequestBuffer

#: How long a thread waits on its connection for the client's next request before handing the
#: connection back to the main loop. Clients that keep a connection busy send the next request
#: within a millisecond of the last answer; 50 ms also bounds how long a newly accepted
#: connection can wait for a thread when every thread is waiting on a connection of its own.
PIN_WAIT_S = 0.05
#: Largest body read in the main loop before a thread is given the connection: a body this size
#: costs a client that much sending before it can hold a thread (for at most the request deadline).
MAX_BUFFERED_BODY = 1024 * 1024
_RECV = 65536
#: Longest a worker leaves a waiting connection to a less busy worker before taking it itself: a
#: less busy worker takes a connection within microseconds unless its main loop is held up.
YIELD_WAIT_S = 0.01
#: How often a yielding worker looks again whether the connection is still waiting.
YIELD_POLL_S = 0.001
#: handle()'s answer for "the request is not complete yet: read the rest in the main loop".
_READ_MORE = object()


def _readable(sock: Any, timeout_s: float) -> bool:
    """Whether `sock` has data (or EOF) within `timeout_s`; poll() takes any descriptor number."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


class DeadlineSocket:
    """The socket gunicorn's parser reads a request from, with one deadline for the whole request
    (not per recv(), which a client sending a byte at a time would reset forever)."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self.deadline = deadline

    def recv(self, size: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not _readable(self._sock, remaining):
            raise TimeoutError("the request was not received within the server's time limit")
        return self._sock.recv(size)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class KeepAliveThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no type hints
    """gthread that reads each request without a thread, under a deadline, and keeps serving a
    keep-alive connection from its thread while it stays busy."""

    #: Set by gunicorn.conf.py's pre_fork on the worker object before the fork; a worker run
    #: without that hook (another config) accepts as stock gthread does.
    mlemu_board: ConnectionBoard | None = None
    mlemu_slot: int | None = None
    _conns = 0
    _on_board = False  # counted on the board: from its main loop's start until it stops

    @property
    def nr_conns(self) -> int:
        """gthread's count of this worker's open connections, published on the board whenever
        gthread changes it."""
        return self._conns

    @nr_conns.setter
    def nr_conns(self, value: int) -> None:
        self._conns = value
        if self._on_board:
            self._publish()

    def _publish(self) -> None:
        if self.mlemu_board is not None and self.mlemu_slot is not None:
            if self._on_board:
                self.mlemu_board.publish(self.mlemu_slot, self._conns)
            else:  # booting or stopping: no place to leave connections to
                self.mlemu_board.release(self.mlemu_slot)

    def run(self) -> None:
        self._on_board = True
        self._publish()
        super().run()

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        self._on_board = False
        self._publish()

    def init_process(self) -> None:
        http_date.install()
        request_target.install()
        settings = Settings.from_env()
        self.header_timeout = settings.header_timeout
        self.request_timeout = settings.request_timeout
        cfg = self.cfg
        # gunicorn's own head limits (limit_request_line, _fields, _field_size): past them its
        # parser answers 414/431 from what is buffered.
        self.max_head = (cfg.limit_request_line or 8190) + 4 + (cfg.limit_request_fields or 32768) * (
            (cfg.limit_request_field_size or 8190) + 2)
        self.reading: dict[Any, RequestBuffer] = {}  # connections whose request is being read
        self.request_path = threading.local()  # the path a thread's request names (handle_error)
        self.accept_paused_until: float | None = None  # left to a less busy worker until then
        self.yielding_since: float | None = None  # when this worker first left the waiting one
        super().init_process()  # runs the main loop

    # -- even connections across workers ---------------------------------------------------------

    def _leave_to_another_worker(self) -> bool:
        """Whether to leave the waiting connection to a less busy worker for now (and pause
        accepting for YIELD_POLL_S), or take it: the peers are even, or it waited YIELD_WAIT_S."""
        board, slot = self.mlemu_board, self.mlemu_slot
        if board is None or slot is None or not self.alive:
            return False
        if not board.others_hold_fewer(slot, self.nr_conns):
            self.yielding_since = None
            return False
        now = time.monotonic()
        if self.yielding_since is None:
            self.yielding_since = now
        elif now - self.yielding_since >= YIELD_WAIT_S:
            self.yielding_since = None
            return False
        self.accept_paused_until = now + YIELD_POLL_S
        self.set_accept_enabled(False)
        return True

    def set_accept_enabled(self, enabled: bool) -> None:
        """gthread's switch (its main loop turns accepting back on at every turn), held off while
        a pause for a less busy worker lasts."""
        if enabled and self.accept_paused_until is not None:
            if time.monotonic() < self.accept_paused_until:
                return
            self.accept_paused_until = None
            if not any(_readable(listener, 0) for listener in self.sockets):
                self.yielding_since = None  # another worker took it
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        """gthread's poller wait, woken when a pause for a less busy worker ends."""
        if self.accept_paused_until is not None:
            timeout = max(0.0, min(timeout, self.accept_paused_until - time.monotonic()))
        super().wait_for_and_dispatch_events(timeout)

    # -- reading requests in the main loop -------------------------------------------------------

    def _new_buffer(self) -> RequestBuffer:
        return RequestBuffer(time.monotonic(), self.header_timeout, self.request_timeout,
                             self.max_head, MAX_BUFFERED_BODY)

    def accept(self, listener: Any) -> None:
        if self._leave_to_another_worker():
            return
        try:
            accepted, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        client_sock = ConnectionSocket.adopt(accepted)
        self.nr_conns += 1
        conn = TConn(self.cfg, client_sock, client_addr, listener.getsockname())
        conn.mlemu_buffer = self._new_buffer()  # a new connection's clock starts at accept
        self._read_in_loop(conn)

    def on_client_socket_readable(self, conn: Any, client: Any) -> None:
        """A kept-alive connection's next request is arriving: read it here, not in a thread."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        conn.mlemu_buffer = self._new_buffer()  # this request's clock starts at its first byte
        self._read_in_loop(conn)
        self._on_readable(conn, client)

    def _read_in_loop(self, conn: Any) -> None:
        conn.sock.setblocking(False)
        self.reading[conn] = conn.mlemu_buffer
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn: Any, client: Any) -> None:
        if conn not in self.reading:
            return
        try:
            data = conn.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        buffer = self.reading[conn]
        # End of input hands over what there is: gunicorn's parser reports the broken request.
        if not data or buffer.feed(data):
            self._stop_reading(conn)
            conn.data_ready = True
            self.enqueue_req(conn)

    def _stop_reading(self, conn: Any) -> None:
        del self.reading[conn]
        with contextlib.suppress(OSError, KeyError, ValueError):
            self.poller.unregister(conn.sock)

    def murder_pending(self) -> None:
        """gthread's sweep, plus requests past their deadline: 408 and close. A stopping worker
        closes the connections that have not started a request within STOP_KEEPALIVE_LINGER, as
        gthread does its kept-alive ones."""
        super().murder_pending()
        now = time.monotonic()
        for conn, buffer in list(self.reading.items()):
            unused = not buffer.data and now - buffer.started > STOP_KEEPALIVE_LINGER
            if buffer.deadline <= now or (unused and not self.alive):
                self._stop_reading(conn)
                if buffer.data:
                    wire_errors.send_timeout(conn.sock, bytes(buffer.data), buffer.head_complete)
                self.nr_conns -= 1
                conn.close()

    def finish_request(self, conn: Any, fs: Any) -> None:
        if not fs.cancelled() and fs.exception() is None and fs.result() is _READ_MORE:
            if self.alive or conn.mlemu_buffer.data:
                self._read_in_loop(conn)
            else:  # stopping, and no request has started on this connection
                self.nr_conns -= 1
                conn.close()
            return
        super().finish_request(conn, fs)

    # -- the thread's side -----------------------------------------------------------------------

    def _take_request(self, conn: Any) -> bool:
        """Give gunicorn's parser this connection's next request, if it is complete: what the
        main loop read, what the last request read ahead, and what is waiting on the socket."""
        buffer = getattr(conn, "mlemu_buffer", None)
        if buffer is None:
            buffer = conn.mlemu_buffer = self._new_buffer()
        if not buffer.complete and conn.parser is not None:
            buffer.feed(conn.parser.unreader.take_buffered())
        while not buffer.complete:
            try:
                data = conn.sock.recv(_RECV, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                data = b""
            if not data:
                break
            buffer.feed(data)
        conn.mlemu_buffer = None
        conn.data_ready = True
        conn.init()  # the parser (once per connection); blocking mode for gunicorn's reads
        conn.sock.setblocking(True)
        data = buffer.take()
        self.request_path.value = wire_errors.request_path(data)
        conn.parser.unreader.unread(data)
        conn.parser.unreader.sock = DeadlineSocket(conn.sock, buffer.request_deadline)
        return True

    def handle(self, conn: Any) -> Any:
        if not self._take_request(conn):
            return _READ_MORE
        keepalive = super().handle(conn)
        # `True` only: gthread's other answers (False: close) and HTTP/2 connections go back to
        # the main loop as they would under gthread.
        while keepalive is True and self._may_keep(conn):
            if not conn.parser.unreader.buf.getvalue():  # nothing read ahead: wait for the client
                try:
                    if not _readable(conn.sock, PIN_WAIT_S):
                        break
                except (OSError, ValueError):  # closed under us: let gthread clean up
                    break
            if not self._take_request(conn):
                return _READ_MORE  # a partial request goes on in the main loop, holding no thread
            keepalive = super().handle(conn)
        return keepalive

    def handle_request(self, req: Any, conn: Any) -> Any:
        """gthread's request handling, with the response's writes sent together
        (deploy/connection_socket.py); an error page written after it goes out uncorked."""
        sock = conn.sock
        if not isinstance(sock, ConnectionSocket):  # TLS wraps it in an SSLSocket
            return super().handle_request(req, conn)
        sock.cork()
        try:
            return super().handle_request(req, conn)
        finally:
            sock.uncork()

    def _keepalive_after(self, conn: Any, keepalive: Any) -> Any:
        """gthread drains a body the application did not read before it reuses the connection,
        setting and restoring a socket timeout to bound the drain (two ioctls, each a GIL
        release): skipped when there is nothing left to drain, a Content-Length body read to its
        end, which is every request mlemu's routes answer."""
        body = getattr(conn.parser.mesg, "body", None) if keepalive else None
        if (body is not None and isinstance(body.reader, LengthReader) and body.reader.length == 0
                and not body.buf.tell() and not body.failed):
            return True
        return super()._keepalive_after(conn, keepalive)

    def _may_keep(self, conn: Any) -> bool:
        busy = self.nr_conns - len(self.reading)
        return bool(self.alive and not conn.is_http2 and busy <= self.cfg.threads)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: Exception) -> None:
        """gunicorn's answer to a request it could not parse (its status and log line), sent as
        JSON in the route's protocol shape instead of its HTML page."""
        captured = wire_errors.CapturedSocket()
        super().handle_error(req, captured, addr, exc)
        if captured.data:
            try:
                path = getattr(req, "path", None) or getattr(self.request_path, "value", None)
                util.write_nonblock(client, wire_errors.gunicorn_error(path, captured, exc))
            except OSError:  # the client may be gone; gunicorn ignores this too
                self.log.debug("Failed to send error message.")
