"""Even connections across gunicorn's workers: the accepting side of deploy/connection_board.py.

All workers accept from one socket, and the kernel's split of a few long-lived keep-alive
connections is often uneven, which leaves one worker's GIL saturated while the other's CPU idles.
Before accepting, a worker that holds more connections than the least busy live worker leaves the
connection to that one for up to YIELD_WAIT_S (deploy/connection_board.py has the measurements).

`AcceptYield` is that decision alone, on the clock it is given (so it is tested exactly);
`BalancedAccept` is the gthread worker mixin that feeds it the board's counts and pauses
accepting while it yields.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from deploy.connection_board import ConnectionBoard
from deploy.request_deadline import readable

#: Longest a worker leaves a waiting connection to a less busy worker before taking it itself: a
#: less busy worker takes a connection within microseconds unless its main loop is held up.
YIELD_WAIT_S = 0.01
#: How often a yielding worker looks again whether the connection is still waiting.
YIELD_POLL_S = 0.001


class AcceptYield:
    """Whether a worker leaves a waiting connection to a less busy one, and until when."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.yielding_since: float | None = None  # when this worker first left the waiting one
        self.paused_until: float | None = None  # accepting is off until then

    def leave(self, others_hold_fewer: bool) -> bool:
        """Leave it (and pause accepting for YIELD_POLL_S) while another worker holds fewer
        connections, for YIELD_WAIT_S at most; then take it."""
        if not others_hold_fewer:
            self.yielding_since = None
            return False
        now = self.clock()
        if self.yielding_since is None:
            self.yielding_since = now
        elif now - self.yielding_since >= YIELD_WAIT_S:
            self.yielding_since = None
            return False
        self.paused_until = now + YIELD_POLL_S
        return True

    def pause_left(self) -> float | None:
        """Seconds the pause still lasts (0 when over), None when not paused."""
        return None if self.paused_until is None else max(0.0, self.paused_until - self.clock())

    def resume(self, connection_waiting: Callable[[], bool]) -> bool:
        """Whether accepting may be turned back on: the pause is over. When the connection is no
        longer waiting (another worker took it), yielding starts afresh next time."""
        if self.paused_until is not None:
            if self.clock() < self.paused_until:
                return False
            self.paused_until = None
            if not connection_waiting():
                self.yielding_since = None
        return True


class BalancedAccept:
    """gthread mixin: publishes the worker's open connections on the board and yields new ones
    to a less busy worker (see the module docstring). Before gthread in the bases."""

    #: Set by gunicorn.conf.py's pre_fork on the worker object before the fork; a worker run
    #: without that hook (another config) accepts as stock gthread does.
    mlemu_board: ConnectionBoard | None = None
    mlemu_slot: int | None = None
    _conns = 0
    _on_board = False  # counted on the board: from its main loop's start until it stops
    _yield: AcceptYield | None = None
    alive: bool
    sockets: list[Any]

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
        self._yield = AcceptYield()
        self._on_board = True
        self._publish()
        super().run()  # type: ignore[misc]

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)  # type: ignore[misc]
        self._on_board = False
        self._publish()

    def leave_to_another_worker(self) -> bool:
        """Whether to skip this accept for now (accepting paused), or take the connection."""
        board, slot, decision = self.mlemu_board, self.mlemu_slot, self._yield
        if board is None or slot is None or decision is None or not self.alive:
            return False
        if decision.leave(board.others_hold_fewer(slot, self.nr_conns)):
            self.set_accept_enabled(False)
            return True
        return False

    def set_accept_enabled(self, enabled: bool) -> None:
        """gthread's switch (its main loop turns accepting back on at every turn), held off while
        a pause for a less busy worker lasts."""
        decision = self._yield
        if enabled and decision is not None and not decision.resume(
                lambda: any(readable(listener, 0) for listener in self.sockets)):
            return
        super().set_accept_enabled(enabled)  # type: ignore[misc]

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        """gthread's poller wait, woken when a pause for a less busy worker ends."""
        left = self._yield.pause_left() if self._yield is not None else None
        if left is not None:
            timeout = max(0.0, min(timeout, left))
        super().wait_for_and_dispatch_events(timeout)  # type: ignore[misc]
