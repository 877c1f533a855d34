"""Which of mlemu's gunicorn-worker optimizations are on: each can be switched off on its own
(MLEMU_WORKER_OFF), so `make bench` can measure what each one is worth (bench/worker_ab.py).

None of them is needed for what the worker is for (requests read under a deadline before a
thread takes them, gunicorn's errors as JSON); each only saves work on a busy keep-alive
connection. Off means gunicorn's gthread does that part exactly as it does without mlemu:

- pinning: a busy keep-alive connection stays on its thread for its next request
  (deploy/worker.py `_may_keep`); off, it goes back to gthread's poller after every request.
- board: a busier worker leaves new connections to a less busy one (deploy/balance.py); off,
  gunicorn.conf.py gives the worker no connection board and it accepts as gthread does.
- socket: accepted connections use deploy/connection_socket.py (no mode change that changes
  nothing, a response's writes sent together); off, gthread's plain socket.
- drain: no drain of a body read to its end (deploy/worker.py `_keepalive_after`); off,
  gthread's drain under its timeout after every request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from core.setting_table import WORKER_OPTIMIZATIONS


@dataclasses.dataclass(frozen=True)
class WorkerTuning:
    """Each optimization: on (True) unless switched off."""

    pinning: bool = True
    board: bool = True
    socket: bool = True
    drain: bool = True

    @classmethod
    def without(cls, off: Iterable[str]) -> WorkerTuning:
        """All on but the optimizations named in `off` (MLEMU_WORKER_OFF's names, which
        core/settings has checked)."""
        off = set(off)
        unknown = off - set(WORKER_OPTIMIZATIONS)
        if unknown:
            raise ValueError(f"unknown worker optimizations: {', '.join(sorted(unknown))}")
        return cls(**{name: False for name in off})

