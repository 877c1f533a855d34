"""observability/tally.py: per-thread rows add up exactly at each flush, a flush touches only the
label sets that changed and writes each value once however many threads changed it, it lets
other threads run during a long flush (measured by an injected clock), and the background flush
is paced by its own cost; rows that hold a counter and its histogram, or two histograms, feed
each child exactly as separate rows would."""

import threading

import pytest

from observability.tally import Pair, Tally, bounds, pace
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


def test_a_counted_histogram_row_counts_each_observation_once():
    """counted: one row per thread and key holds the histogram and its counter; the counter's
    value is the number of observations, whichever threads made them; each thread asks for the
    key's children once."""
    tally, counter, histogram = Tally(), Value(), Histogram()
    asked: list[str] = []

    def resolve(key: str) -> tuple[Value, Histogram]:
        asked.append(key)
        return counter, histogram

    record = tally.counted(resolve, BOUNDS)

    def work() -> None:
        for i in range(300):
            record("ok", (0.05, 0.5, 5.0)[i % 3])

    _in_threads(3, work)
    tally.flush()
    assert asked == ["ok"] * 3
    assert (counter.calls, counter.total) == (1, 900)
    assert [b.total for b in histogram._buckets] == [300, 300, 300]
    assert abs(histogram._sum.total - 300 * (0.05 + 0.5 + 5.0)) < 1e-6
    tally.flush()  # nothing new: nothing written
    assert counter.calls == 1


def test_two_counters_may_share_one_histogram():
    """A request's latency histogram has no status label: its rows by status add into it."""
    tally, ok, failed, histogram = Tally(), Value(), Value(), Histogram()
    record = tally.counted(lambda code: (ok if code == "200" else failed, histogram), BOUNDS)
    record("200", 0.5)
    record("200", 0.5)
    record("500", 5.0)
    tally.flush()
    assert (ok.total, failed.total) == (2, 1)
    assert [b.total for b in histogram._buckets] == [0, 2, 1]
    assert histogram._sum.total == 6.0


def test_a_pair_row_feeds_both_histograms_and_adds_up_with_their_own_rows():
    latency, rows = Histogram(), Histogram()
    pair = Pair(latency, BOUNDS, rows, bounds((1.0, 4.0)))
    tally = Tally()
    tally.observe_pair(pair, 0.05, 1)
    tally.observe_pair(pair, 2.0, 3)
    tally.observe(rows, pair.second_bounds, 8)  # the same child recorded alone (a merged call)
    tally.flush()
    assert [b.total for b in latency._buckets] == [1, 0, 1]
    assert abs(latency._sum.total - 2.05) < 1e-9
    assert [b.total for b in rows._buckets] == [1, 1, 1]
    assert rows._sum.total == 12


def test_observe_each_and_a_recorder_feed_a_child_as_observe_does():
    """observe_each (a merged call's requests' instances, one lookup) and a child's recorder
    (one call per event) add to the same row `observe` adds to, value by value."""
    seen, told = Histogram(), Histogram()
    tally = Tally()
    for value in (0.05, 0.5, 5.0, 0.5):
        tally.observe(seen, BOUNDS, value)
    tally.observe_each(told, BOUNDS, [0.05, 0.5])
    record = tally.recorder(told, BOUNDS)
    _in_threads(1, lambda: record(5.0))  # another thread's row of the same child
    record(0.5)
    tally.flush()
    assert [b.total for b in told._buckets] == [b.total for b in seen._buckets] == [1, 2, 1]
    assert told._sum.total == seen._sum.total == pytest.approx(6.05)


def test_a_key_keeps_one_layout():
    tally, counter, histogram = Tally(), Value(), Histogram()
    tally.counted(lambda key: (counter, histogram), BOUNDS)(counter, 0.5)

    def other_thread() -> None:
        with pytest.raises(ValueError, match="one way only"):
            tally.inc(counter)  # a second layout for the same key would not add up

    _in_threads(1, other_thread)
