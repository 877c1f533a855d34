"""observability/tally.py: per-thread rows add up exactly at each flush, a flush touches only the
label sets that changed and writes each value once however many threads changed it, it lets
other threads run during a long flush (measured by an injected clock), and the background flush
is paced by its own cost."""

import threading

from observability.tally import Tally, bounds, pace
from tests.kit.clocks import FakeClock

BOUNDS = bounds((0.1, 1.0))


class Value:
    """Stands in for a prometheus_client value: records every `inc`."""

    def __init__(self) -> None:
        self.total = 0.0
        self.calls = 0

    def inc(self, amount: float) -> None:
        self.total += amount
        self.calls += 1


class Histogram:
    def __init__(self) -> None:
        self._sum = Value()
        self._buckets = [Value() for _ in BOUNDS]


def test_rows_of_many_threads_add_up_exactly():
    tally, counter, histogram = Tally(), Value(), Histogram()

    def work() -> None:
        for i in range(1000):
            tally.inc(counter)
            tally.observe(histogram, BOUNDS, (0.05, 0.5, 5.0)[i % 3])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    tally.flush()  # a flush while they run loses nothing
    for thread in threads:
        thread.join()
    tally.flush()
    assert counter.total == 4000
    assert [b.total for b in histogram._buckets] == [1336, 1332, 1332]
    assert abs(histogram._sum.total - (1336 * 0.05 + 1332 * 0.5 + 1332 * 5.0)) < 1e-6


def test_a_flush_touches_only_what_changed():
    tally = Tally()
    values = [Value() for _ in range(500)]
    for value in values:
        tally.inc(value)
    tally.flush()
    assert all(value.calls == 1 for value in values)
    tally.inc(values[7], 2.0)
    tally.flush()
    tally.flush()
    assert [value.calls for value in values if value.calls > 1] == [2]
    assert values[7].total == 3.0


def _in_threads(count: int, work) -> None:
    threads = [threading.Thread(target=work) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_a_flush_writes_each_value_once_whatever_the_threads_that_changed_it():
    tally, counter, histogram = Tally(), Value(), Histogram()

    def work() -> None:
        tally.inc(counter, 2.0)
        tally.observe(histogram, BOUNDS, 0.5)

    _in_threads(6, work)
    tally.flush()
    assert (counter.calls, counter.total) == (1, 12.0)
    assert (histogram._sum.calls, histogram._sum.total) == (1, 3.0)
    assert [(b.calls, b.total) for b in histogram._buckets] == [(0, 0), (1, 6), (0, 0)]
    _in_threads(2, work)  # new threads' rows join the old ones' (which still count)
    tally.flush()
    tally.flush()
    assert (counter.calls, counter.total) == (2, 16.0)
    assert [(b.calls, b.total) for b in histogram._buckets] == [(0, 0), (2, 8), (0, 0)]


def test_a_long_flush_lets_other_threads_run():
    """A flush yields the GIL once every SLICE_S of its own clock: here each reading is 0.3 ms
    later, so a slice (0.5 ms) ends after every second child."""
    yields = []
    tally = Tally(clock=FakeClock(step=0.0003), pause=yields.append)
    values = [Value() for _ in range(3000)]
    for value in values:
        tally.inc(value)
    tally.flush()
    assert yields == [0] * 1500
    assert all(value.total == 1 for value in values)


def test_a_quick_flush_does_not_yield():
    yields = []
    tally = Tally(clock=FakeClock(), pause=yields.append)  # no time passes
    for value in [Value() for _ in range(100)]:
        tally.inc(value)
    tally.flush()
    assert yields == []


def test_an_observation_of_zero_is_still_flushed():
    tally, histogram = Tally(), Histogram()
    tally.observe(histogram, BOUNDS, 0.0)
    tally.flush()
    assert histogram._buckets[0].total == 1 and histogram._sum.calls == 0


def test_the_background_flush_is_paced_by_its_cost():
    assert pace(0.0005) == Tally.FLUSH_S  # cheap: every second
    assert pace(0.037) == 0.037 / Tally.FLUSH_SHARE  # 37 ms: at most 1 % of the time
    assert pace(5.0) == Tally.MAX_FLUSH_S  # never staler than this
