"""The figures of the console's "Metrics at a glance", from the Prometheus data mlemu keeps.

A `Sample` is one reading of the exposition GET /metrics serves (every process merged), reduced
to what the charts need: per model, requests, errors and the request-latency histogram; adaptive
batching's merged calls; model loads. Prometheus counters only grow, so a figure over time is
the difference of two samples: `History` keeps the samples this process took (at most one per
`interval_s`, the last `keep` of them; its clock is injected) and `points` turns consecutive
pairs into per-second rates and latency quantiles, as Prometheus's rate() and
histogram_quantile() would.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Iterable

from prometheus_client.parser import text_string_to_metric_families

#: Protocol labels that are not model serving (health probes, /metrics, management, unknown).
NOT_SERVING = frozenset({"health", "metrics", "ml_v1", "other"})


@dataclasses.dataclass
class ModelCounts:
    requests: float = 0.0
    errors: float = 0.0
    #: Request latency: upper bound (seconds) -> cumulative count.
    buckets: dict[float, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Sample:
    at: float
    models: dict[str, ModelCounts] = dataclasses.field(default_factory=dict)
    merged_calls: float = 0.0
    merged_requests: float = 0.0
    loads: float = 0.0
    load_failures: float = 0.0
    #: "model/version" -> processes that hold it loaded now.
    loaded: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Resident memory of each serving process (pid label; "" in a single process).
    memory: dict[str, float] = dataclasses.field(default_factory=dict)


def _failed(code: str) -> bool:
    return not (code.startswith("2") or code == "OK")


def parse(text: str, at: float) -> Sample:
    """A Sample of a Prometheus text exposition read at time `at`."""
    sample = Sample(at)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels, name = s.labels, s.name
            model = labels.get("model", "")
            serving = labels.get("protocol") not in NOT_SERVING and model != ""
            if name == "mlemu_requests_total" and serving:
                counts = sample.models.setdefault(model, ModelCounts())
                counts.requests += s.value
                if _failed(labels.get("code", "")):
                    counts.errors += s.value
            elif name == "mlemu_request_duration_seconds_bucket" and serving:
                buckets = sample.models.setdefault(model, ModelCounts()).buckets
                bound = float(labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + s.value
            elif name == "mlemu_batch_merged_requests_count":
                sample.merged_calls += s.value
            elif name == "mlemu_batch_merged_requests_sum":
                sample.merged_requests += s.value
            elif name == "mlemu_model_load_duration_seconds_count":
                sample.loads += s.value
            elif name == "mlemu_model_load_failures_total":
                sample.load_failures += s.value
            elif name == "mlemu_models_loaded" and s.value > 0:
                sample.loaded[f"{model}/{labels.get('version', '')}"] = s.value
            elif name == "process_resident_memory_bytes":
                sample.memory[labels.get("pid", "")] = s.value
    return sample


def quantile(q: float, cumulative: list[tuple[float, float]]) -> float | None:
    """histogram_quantile over (upper bound, cumulative count) pairs; None without requests."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if bound == float("inf"):
                return lower  # beyond the last finite bucket: its bound is all one can say
            share = (rank - below) / (count - below) if count > below else 0.0
            return lower + (bound - lower) * share
        lower, below = bound, count
    return lower


def _delta(new: float, old: float) -> float:
    """A counter's growth; a smaller value means the server restarted (counters start over)."""
    return new - old if new >= old else new


@dataclasses.dataclass(frozen=True)
class Point:
    """One model's figures between two samples, placed at the later sample's time."""

    at: float
    rps: float
    errors_per_s: float
    p50_ms: float | None
    p99_ms: float | None


def between(old: Sample, new: Sample) -> dict[str, Point]:
    seconds = new.at - old.at
    if seconds <= 0:
        return {}
    points = {}
    for model, counts in new.models.items():
        before = old.models.get(model, ModelCounts())
        window = sorted((bound, _delta(count, before.buckets.get(bound, 0.0)))
                        for bound, count in counts.buckets.items())
        p50, p99 = quantile(0.5, window), quantile(0.99, window)
        points[model] = Point(
            new.at, _delta(counts.requests, before.requests) / seconds,
            _delta(counts.errors, before.errors) / seconds,
            None if p50 is None else p50 * 1000, None if p99 is None else p99 * 1000)
    return points


def merge_ratio(old: Sample, new: Sample) -> float | None:
    """Requests per model call of adaptive batching between two samples (None: no merged call)."""
    calls = _delta(new.merged_calls, old.merged_calls)
    return _delta(new.merged_requests, old.merged_requests) / calls if calls > 0 else None


class History:
    """The samples this process took, oldest first: at most one per `interval_s`, `keep` kept."""

    def __init__(self, interval_s: float = 5.0, keep: int = 120,
                 clock: Callable[[], float] = time.time) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.samples: collections.deque[Sample] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    def take(self, read: Callable[[], str]) -> Sample:
        """The newest sample, reading a new one through `read` when the last is old enough."""
        # One reader at a time: two threads sampling together would keep two samples a moment
        # apart, and a rate over that moment is meaningless.
        with self._lock:
            now = self.clock()
            if not self.samples or now - self.samples[-1].at >= self.interval_s:
                self.samples.append(parse(read(), now))
            return self.samples[-1]

    def points(self) -> dict[str, list[Point]]:
        """Each model's points over the kept samples, oldest first."""
        series: dict[str, list[Point]] = {}
        for old, new in pairs(list(self.samples)):
            for model, point in between(old, new).items():
                series.setdefault(model, []).append(point)
        return series


def pairs(samples: Iterable[Sample]) -> list[tuple[Sample, Sample]]:
    return list(itertools.pairwise(samples))
