"""mlemu's gunicorn worker: gthread, with a busy keep-alive connection served by the thread it is on.

Stock gthread (gunicorn/workers/gthread.py) hands a keep-alive connection back to its main loop
after every request: the pool thread returns, a future callback writes to the worker's wake-up
pipe, the main loop re-registers the socket with its poller, and when the next request arrives it
submits the connection to the pool again. For small requests that round trip costs about as
much GIL time as mlemu's own request handling (py-spy figures in bench/RESULTS.md): with
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

Everything else (parsing, limits, HTTP/2, errors, logging) is gthread's own code.
"""

from __future__ import annotations

import select
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

#: How long a thread waits on its connection for the client's next request before handing the
#: connection back to the main loop. Clients that keep a connection busy send the next request
#: within a millisecond of the last answer; 50 ms also bounds how long a newly accepted
#: connection can wait for a thread when every thread is waiting on a connection of its own.
PIN_WAIT_S = 0.05


def _readable(sock: Any, timeout_s: float) -> bool:
    """Whether `sock` has data (or EOF) within `timeout_s`; poll() takes any descriptor number."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


class KeepAliveThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no type hints
    """gthread that keeps serving a keep-alive connection from its thread while it stays busy."""

    def handle(self, conn: Any) -> Any:
        keepalive = super().handle(conn)
        # `True` only: gthread's other answers (False: close, _DEFER: no data yet) and HTTP/2
        # connections go back to the main loop as they would under gthread.
        while keepalive is True and self._may_keep(conn):
            if not conn.parser.unreader.buf.getvalue():  # nothing read ahead: wait for the client
                try:
                    if not _readable(conn.sock, PIN_WAIT_S):
                        break
                except (OSError, ValueError):  # closed under us: let gthread clean up
                    break
            keepalive = super().handle(conn)
        return keepalive

    def _may_keep(self, conn: Any) -> bool:
        return bool(self.alive and not conn.is_http2 and self.nr_conns <= self.cfg.threads)
