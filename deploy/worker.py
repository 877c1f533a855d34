"""mlemu's gunicorn worker: gthread that reads each request without a thread, under a deadline,
and answers gunicorn's own errors as JSON; a busy keep-alive connection stays on its thread.

Slow clients: a request is read in the worker's main loop, without a thread, until it is complete
(deploy/request_buffer.py), under a per-request deadline (MLEMU_HEADER_TIMEOUT,
MLEMU_REQUEST_TIMEOUT); one that misses it is answered 408 and closed. Stock gthread gives a thread
to a connection as soon as its first byte arrives, and that thread then blocks until the client
finishes its headers and body, however long that takes: a few dozen clients that send half a
request held every thread. What the thread still reads itself (a body larger than the buffer's
bound) is read under the same deadline (deploy/request_deadline.py). gunicorn's own error pages
(400, 414, 431, ...: gunicorn/workers/base.py `handle_error`, gunicorn/util.py `write_error`) are
HTML: they are answered in the protocol's JSON shape instead (deploy/wire_errors.py).

Busy keep-alive connections: stock gthread hands a keep-alive connection back to its main loop
after every request (a future callback, the wake-up pipe, the poller, the pool again). This
worker keeps such a connection in its thread for the next request while that is free: the next
request must arrive within PIN_WAIT_S, or the connection goes back to the poller exactly as under
gthread (idle connections hold no thread; the keep-alive timeout, the SIGTERM drain and
`Connection: close` while stopping work as before); and every open connection of the worker must
be able to have a thread of its own (open connections <= threads), otherwise they take turns
through the poller as under gthread. Even connections across workers: deploy/balance.py.
Each optimization can be switched off to measure it (MLEMU_WORKER_OFF, deploy/tuning.py).

The gthread methods overridden here are not gunicorn's public interface: deploy/fence.py keeps
this worker to the gunicorn versions it was tested with (MLEMU_WORKER_CLASS=gthread runs the stock
worker instead). Everything else (parsing, limits, HTTP/2, logging) is gthread's own code.
"""

from __future__ import annotations

import contextlib
import errno
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
from deploy import wire_errors
from deploy.balance import BalancedAccept
from deploy.connection_socket import ConnectionSocket
from deploy.request_buffer import RequestBuffer
from deploy.request_deadline import DeadlineSocket, readable
from deploy.tuning import WorkerTuning

#: How long a thread waits on its connection for the client's next request before handing the
#: connection back to the main loop. Clients that keep a connection busy send the next request
#: within a millisecond of the last answer; 50 ms also bounds how long a newly accepted
#: connection can wait for a thread when every thread is waiting on a connection of its own.
PIN_WAIT_S = 0.05
#: Largest body read in the main loop before a thread is given the connection: a body this size
#: costs a client that much sending before it can hold a thread (for at most the request deadline).
MAX_BUFFERED_BODY = 1024 * 1024
_RECV = 65536
#: handle()'s answer for "the request is not complete yet: read the rest in the main loop".
_READ_MORE = object()


class _Refused(Exception):
    """A request the worker answered itself (RequestBuffer.refusal): close the connection."""


class KeepAliveThreadWorker(BalancedAccept, ThreadWorker):  # type: ignore[misc]  # gunicorn: untyped
    """gthread that reads each request without a thread, under a deadline (see the module
    docstring), keeps serving a keep-alive connection from its thread while it stays busy, and
    answers gunicorn's own errors as JSON."""

    def init_process(self) -> None:
        self.configure(Settings.from_env())
        super().init_process()  # runs the main loop

    def configure(self, settings: Settings) -> None:
        """The worker's limits and optimizations from `settings` (before its main loop)."""
        self.tuning = WorkerTuning.without(settings.worker_off)
        self.header_timeout = settings.header_timeout
        self.request_timeout = settings.request_timeout
        # No route accepts a body larger than this: a chunk declaring more is refused at once.
        self.max_declared = max(settings.max_request_bytes, settings.max_message_bytes)
        cfg = self.cfg
        # gunicorn's own head limits (limit_request_line, _fields, _field_size): past them its
        # parser answers 414/431 from what is buffered.
        self.max_head = (cfg.limit_request_line or 8190) + 4 + (cfg.limit_request_fields or 32768) * (
            (cfg.limit_request_field_size or 8190) + 2)
        self.reading: dict[Any, RequestBuffer] = {}  # connections whose request is being read
        self.request_path = threading.local()  # the path a thread's request names (handle_error)

    # -- reading requests in the main loop -------------------------------------------------------

    def _new_buffer(self) -> RequestBuffer:
        return RequestBuffer(time.monotonic(), self.header_timeout, self.request_timeout,
                             self.max_head, MAX_BUFFERED_BODY, self.max_declared)

    def accept(self, listener: Any) -> None:
        if self.leave_to_another_worker():
            return
        try:
            accepted, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        client_sock = ConnectionSocket.adopt(accepted) if self.tuning.socket else accepted
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
        if buffer.refusal is not None:  # answered here; the connection then closes
            with contextlib.suppress(OSError):
                conn.sock.sendall(wire_errors.response(wire_errors.request_path(data), 400,
                                                       "Bad Request", buffer.refusal))
            raise _Refused
        self.request_path.value = wire_errors.request_path(data)
        conn.parser.unreader.unread(data)
        conn.parser.unreader.sock = DeadlineSocket(conn.sock, buffer.request_deadline)
        return True

    def handle(self, conn: Any) -> Any:
        try:
            return self._handle(conn)
        except _Refused:
            return False  # gthread closes the connection

    def _handle(self, conn: Any) -> Any:
        if not self._take_request(conn):
            return _READ_MORE
        keepalive = super().handle(conn)
        # `True` only: gthread's other answers (False: close) and HTTP/2 connections go back to
        # the main loop as they would under gthread.
        while keepalive is True and self._may_keep(conn):
            if not conn.parser.unreader.buf.getvalue():  # nothing read ahead: wait for the client
                try:
                    if not readable(conn.sock, PIN_WAIT_S):
                        break
                except (OSError, ValueError):  # closed under us: let gthread clean up
                    break
            if not self._take_request(conn):
                return _READ_MORE  # a partial request goes on in the main loop, holding no thread
            keepalive = super().handle(conn)
        return keepalive

    def _may_keep(self, conn: Any) -> bool:
        """Whether the thread keeps `conn` for its next request (pinning); else it goes back to
        gthread's poller."""
        busy = self.nr_conns - len(self.reading)
        return bool(self.tuning.pinning and self.alive and not conn.is_http2
                    and busy <= self.cfg.threads)

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
        body = getattr(conn.parser.mesg, "body", None) if keepalive and self.tuning.drain else None
        if (body is not None and isinstance(body.reader, LengthReader) and body.reader.length == 0
                and not body.buf.tell() and not body.failed):
            return True
        return super()._keepalive_after(conn, keepalive)

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
