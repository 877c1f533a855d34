"""Connections spread evenly over gunicorn's workers (deploy/connection_board.py,
deploy/balance.py): a worker that holds more open connections than another leaves new ones to it
for a short while, so a client pool's long-lived keep-alive connections do not pile onto one
worker's GIL while the other idles.

Whether a peer takes a connection within YIELD_WAIT_S depends on how busy the machine is, so the
decisions are tested here on an injected clock and a real board, without live workers (a live
server's split would be an assertion on the machine's speed)."""

from deploy.balance import YIELD_POLL_S, YIELD_WAIT_S, AcceptYield, BalancedAccept
from deploy.connection_board import UNUSED, ConnectionBoard
from tests.kit.clocks import FakeClock


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


def test_a_busier_worker_leaves_the_connection_for_at_most_the_yield_wait():
    clock = FakeClock(100.0)
    decision = AcceptYield(clock)
    assert decision.leave(True)
    assert decision.paused_until == 100.0 + YIELD_POLL_S
    clock.advance(YIELD_WAIT_S / 2)
    assert decision.leave(True)  # still waiting, still within the wait
    clock.now = 100.0 + YIELD_WAIT_S
    assert not decision.leave(True)  # waited long enough: this worker takes it
    assert decision.leave(True)  # the next connection starts a wait of its own


def test_an_even_worker_takes_the_connection_at_once():
    decision = AcceptYield(FakeClock())
    assert not decision.leave(False)
    assert decision.paused_until is None


def test_accepting_resumes_when_the_pause_ends_and_a_taken_connection_resets_the_wait():
    clock = FakeClock()
    decision = AcceptYield(clock)
    assert decision.leave(True)
    assert decision.pause_left() == YIELD_POLL_S
    assert not decision.resume(lambda: True)  # still paused
    clock.advance(YIELD_POLL_S)
    assert decision.pause_left() == 0.0
    assert decision.resume(lambda: False)  # over; the other worker took it
    assert decision.pause_left() is None and decision.yielding_since is None
    assert decision.resume(lambda: True)  # not paused: nothing to wait for


class Gthread:
    """The parts of gthread BalancedAccept calls, recorded."""

    def __init__(self) -> None:
        self.alive = True
        self.sockets: list = []
        self.accepting: list[bool] = []

    def set_accept_enabled(self, enabled: bool) -> None:
        self.accepting.append(enabled)


class Worker(BalancedAccept, Gthread):
    pass


def worker(board: ConnectionBoard, slot: int, clock: FakeClock) -> Worker:
    made = Worker()
    made.mlemu_board, made.mlemu_slot = board, slot
    made._yield = AcceptYield(clock)
    made._on_board = True
    made._publish()
    return made


def test_workers_publish_their_connections_and_the_busier_one_yields():
    board, clock = ConnectionBoard(slots=4), FakeClock()
    busy, idle = worker(board, 0, clock), worker(board, 1, clock)
    busy.nr_conns = 2
    idle.nr_conns = 1
    assert busy.leave_to_another_worker()
    assert busy.accepting == [False]
    busy.set_accept_enabled(True)  # gthread's loop turns accepting on: held off while paused
    assert busy.accepting == [False]
    assert not idle.leave_to_another_worker()  # the less busy one takes it
    idle.nr_conns = 2
    clock.advance(YIELD_POLL_S)
    busy.set_accept_enabled(True)
    assert busy.accepting == [False, True]
    assert not busy.leave_to_another_worker()  # even now


def test_a_stopping_worker_is_no_place_to_leave_connections_to():
    board, clock = ConnectionBoard(slots=2), FakeClock()
    busy, stopping = worker(board, 0, clock), worker(board, 1, clock)
    busy.nr_conns = 3
    stopping._on_board = False
    stopping._publish()
    assert not busy.leave_to_another_worker()


def test_a_worker_without_a_board_accepts_as_gthread_does():
    made = Worker()
    assert not made.leave_to_another_worker()
    made.set_accept_enabled(True)
    assert made.accepting == [True]
