"""observability/metrics.Instruments: a request's children are cached per label tuple (bounded,
each tuple with its own labels) and a request and a model call are each counted once, with
their latency, status and instances, as prometheus_client exposes them."""

from typing import Any

import pytest

from observability import metrics
from observability.metrics import Instruments

VERSION = "projects/p/models/iris/versions/v1"


def sample(instruments: Instruments, name: str, **labels: str) -> float:
    instruments.flush()
    value = instruments.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def labels_of(child: Any) -> dict[str, str]:
    """The label values prometheus_client gave a child (from its collected samples)."""
    return dict(zip(child._labelnames, child._labelvalues, strict=True))


def test_requests_are_counted_once_each_with_their_code_and_latency() -> None:
    instruments = Instruments()
    for code, seconds in (("200", 0.002), ("200", 0.2), ("400", 0.002)):
        instruments.request(("http", "aiplatform", "predict", "iris", "v1", code), seconds)
    request = {"transport": "http", "protocol": "aiplatform", "method": "predict",
               "model": "iris", "version": "v1"}
    assert sample(instruments, "mlemu_requests_total", **request, code="200") == 2
    assert sample(instruments, "mlemu_requests_total", **request, code="400") == 1
    assert sample(instruments, "mlemu_request_duration_seconds_count", **request) == 3
    assert sample(instruments, "mlemu_request_duration_seconds_bucket", **request, le="0.0025") == 2
    assert sample(instruments, "mlemu_request_duration_seconds_sum", **request) == \
        pytest.approx(0.204)


def test_a_model_call_records_its_latency_and_instances_once() -> None:
    instruments = Instruments()
    version = instruments.version(VERSION)
    version.model_call(0.003, [[1.0], [2.0], [3.0]])
    version.model_call(0.0004, {"x": [[1.0]]})
    with version.merged_call([2, 1]):  # the merged requests' instances are counted by it
        version.model_call(0.02, [[1.0], [2.0], [3.0]])
    labels = {"model": "iris", "version": "v1"}
    assert sample(instruments, "mlemu_model_call_duration_seconds_count", **labels) == 3
    assert sample(instruments, "mlemu_model_call_duration_seconds_bucket", **labels,
                  le="0.0005") == 1
    assert sample(instruments, "mlemu_model_call_duration_seconds_sum", **labels) == \
        pytest.approx(0.0234)
    assert sample(instruments, "mlemu_instances_per_request_count", **labels) == 4
    assert sample(instruments, "mlemu_instances_per_request_sum", **labels) == 7
    assert sample(instruments, "mlemu_instances_per_request_bucket", **labels, le="1.0") == 2
    assert sample(instruments, "mlemu_batch_merged_requests_sum", **labels) == 2


def test_batching_s_own_call_reports_record_what_a_wrapper_s_model_call_records() -> None:
    """call_alone and call_merged (adaptive batching times built-in frameworks' calls and knows
    which each is) record exactly what model_call records outside and inside a merge."""
    def figures(record: Any) -> list[float]:
        instruments = Instruments()
        record(instruments.version(VERSION))
        labels = {"model": "iris", "version": "v1"}
        return [sample(instruments, f"mlemu_{name}", **labels, **extra) for name, extra in (
            ("model_call_duration_seconds_count", {}), ("model_call_duration_seconds_sum", {}),
            ("model_call_duration_seconds_bucket", {"le": "0.0005"}),
            ("instances_per_request_count", {}), ("instances_per_request_sum", {}),
            ("instances_per_request_bucket", {"le": "1.0"}), ("batch_merged_requests_sum", {}))]

    def by_flag(version: metrics.VersionInstruments) -> None:
        version.model_call(0.003, [[1.0], [2.0], [3.0]])
        version.model_call(0.0004, {"x": [[1.0]]})
        with version.merged_call([2, 1]):
            version.model_call(0.02, [[1.0], [2.0], [3.0]])

    def told(version: metrics.VersionInstruments) -> None:
        version.call_alone(0.003, [[1.0], [2.0], [3.0]])
        version.call_alone(0.0004, {"x": [[1.0]]})
        with version.merged_call([2, 1]):
            version.call_merged(0.02, [[1.0], [2.0], [3.0]])

    assert figures(told) == figures(by_flag) == pytest.approx([3, 0.0234, 1, 4, 7, 2, 2])


def test_each_queued_request_s_wait_is_observed_once() -> None:
    instruments = Instruments()
    version = instruments.version(VERSION)
    for seconds in (0.002, 0.002, 0.3):
        version.waited(seconds)
    labels = {"model": "iris", "version": "v1"}
    assert sample(instruments, "mlemu_batch_queue_wait_seconds_count", **labels) == 3
    assert sample(instruments, "mlemu_batch_queue_wait_seconds_bucket", **labels,
                  le="0.0025") == 2
    assert sample(instruments, "mlemu_batch_queue_wait_seconds_sum", **labels) == \
        pytest.approx(0.304)


def test_request_children_are_cached_per_label_tuple_with_their_labels() -> None:
    instruments = Instruments()
    key = ("grpc", "v2", "infer", "iris", "v1", "0")
    counter, histogram = instruments.request_children(key)
    assert instruments.request_children(key) == (counter, histogram)
    assert labels_of(counter) == {"transport": "grpc", "protocol": "v2", "method": "infer",
                                  "model": "iris", "version": "v1", "code": "0"}
    assert labels_of(histogram) == {"transport": "grpc", "protocol": "v2", "method": "infer",
                                    "model": "iris", "version": "v1"}
    other = instruments.request_children((*key[:5], "13"))
    assert other[0] is not counter and other[1] is histogram  # the latency has no code label


def test_the_request_cache_is_bounded_and_counts_go_on_when_it_starts_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "REQUEST_CHILDREN", 3)
    instruments = Instruments()
    for version in ("v1", "v2", "v3", "v4", "v5", "v1"):
        instruments.request(("http", "aiplatform", "predict", "iris", version, "200"), 0.001)
        assert len(instruments._requests) <= 3
    instruments.request(("http", "aiplatform", "predict", "iris", "v1", "200"), 0.001)
    assert sample(instruments, "mlemu_requests_total", transport="http", protocol="aiplatform",
                  method="predict", model="iris", version="v1", code="200") == 3
    assert sample(instruments, "mlemu_requests_total", transport="http", protocol="aiplatform",
                  method="predict", model="iris", version="v5", code="200") == 1
