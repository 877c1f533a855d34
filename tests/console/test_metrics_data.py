"""The decision functions behind "Metrics at a glance": reading the exposition, rates and
quantiles between samples, counter restarts, batching's merge ratio, the sampling interval (an
injected clock) and the SVG charts' escaping."""

from __future__ import annotations

import pytest

from console import charts
from console.metrics_data import History, between, merge_ratio, parse, quantile

IRIS = 'transport="http",protocol="aiplatform",method="predict",model="iris",version="v1"'
HEALTH = 'transport="http",protocol="health",method="other",model="",version=""'


def exposition(requests: int, errors: int, fast: int, merged_calls: int = 0,
               merged_requests: int = 0, loads: int = 1) -> str:
    """A /metrics body: `requests` answered OK for model iris (`fast` of them under 5 ms, the rest
    under 100 ms), `errors` answered 429, plus a health probe that must not count."""
    total = requests + errors
    return f"""# TYPE mlemu_requests counter
mlemu_requests_total{{{IRIS},code="200"}} {requests}
mlemu_requests_total{{{IRIS},code="429"}} {errors}
mlemu_requests_total{{{HEALTH},code="200"}} 50
# TYPE mlemu_request_duration_seconds histogram
mlemu_request_duration_seconds_bucket{{{IRIS},le="0.005"}} {fast}
mlemu_request_duration_seconds_bucket{{{IRIS},le="0.1"}} {total}
mlemu_request_duration_seconds_bucket{{{IRIS},le="+Inf"}} {total}
mlemu_request_duration_seconds_count{{{IRIS}}} {total}
mlemu_request_duration_seconds_sum{{{IRIS}}} 1.0
# TYPE mlemu_batch_merged_requests histogram
mlemu_batch_merged_requests_count{{model="iris",version="v1"}} {merged_calls}
mlemu_batch_merged_requests_sum{{model="iris",version="v1"}} {merged_requests}
# TYPE mlemu_model_load_duration_seconds histogram
mlemu_model_load_duration_seconds_count{{model="iris",version="v1"}} {loads}
mlemu_model_load_duration_seconds_sum{{model="iris",version="v1"}} 0.2
# TYPE mlemu_models_loaded gauge
mlemu_models_loaded{{model="iris",version="v1"}} 2.0
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes{{pid="41"}} 1048576.0
"""


def test_parse_keeps_serving_requests_per_model():
    sample = parse(exposition(10, 2, 4), at=5.0)
    assert list(sample.models) == ["iris"]  # the health probe is not a model's request
    iris = sample.models["iris"]
    assert (iris.requests, iris.errors) == (12, 2)
    assert iris.buckets == {0.005: 4, 0.1: 12, float("inf"): 12}
    assert sample.loaded == {"iris/v1": 2.0} and sample.memory == {"41": 1048576.0}
    assert sample.loads == 1


def test_rates_and_quantiles_between_two_samples():
    old = parse(exposition(10, 0, 10), at=100.0)
    new = parse(exposition(30, 10, 20), at=110.0)  # +20 ok, +10 errors; 10 fast, 20 slow
    point = between(old, new)["iris"]
    assert point.rps == pytest.approx(3.0) and point.errors_per_s == pytest.approx(1.0)
    # 30 requests in the interval: the 15th is among the slow ones (between 5 and 100 ms)
    assert point.p50_ms == pytest.approx(5 + 95 * (15 - 10) / 20)
    assert point.p99_ms == pytest.approx(5 + 95 * (29.7 - 10) / 20)


def test_a_restarted_server_starts_its_counters_over():
    old = parse(exposition(1000, 0, 1000), at=0.0)
    new = parse(exposition(5, 0, 5), at=5.0)
    assert between(old, new)["iris"].rps == pytest.approx(1.0)


def test_no_requests_gives_no_quantile():
    old = parse(exposition(3, 0, 3), at=0.0)
    new = parse(exposition(3, 0, 3), at=5.0)
    point = between(old, new)["iris"]
    assert point.rps == 0 and point.p50_ms is None and point.p99_ms is None
    assert quantile(0.5, []) is None


def test_merge_ratio_is_requests_per_model_call():
    old = parse(exposition(0, 0, 0, merged_calls=2, merged_requests=4), at=0.0)
    new = parse(exposition(0, 0, 0, merged_calls=12, merged_requests=34), at=5.0)
    assert merge_ratio(old, new) == pytest.approx(3.0)
    assert merge_ratio(new, new) is None


def test_history_samples_at_most_once_per_interval():
    now = [0.0]
    reads = []

    def read() -> str:
        reads.append(now[0])
        return exposition(int(now[0]), 0, int(now[0]))

    history = History(interval_s=5.0, keep=3, clock=lambda: now[0])
    for moment in (0.0, 1.0, 4.9, 5.0, 10.0, 15.0, 20.0):
        now[0] = moment
        history.take(read)
    assert reads == [0.0, 5.0, 10.0, 15.0, 20.0]
    assert [s.at for s in history.samples] == [10.0, 15.0, 20.0]  # only `keep` are kept
    assert [p.rps for p in history.points()["iris"]] == [1.0, 1.0]


def test_charts_escape_names_and_say_when_empty():
    empty = charts.svg(charts.Chart("Requests per second", "req/s", {}))
    assert "no data yet" in empty and 'role="img"' in empty
    drawn = charts.svg(charts.Chart("p99 <b>", "ms", {"<script>": [(0.0, 1.0), (5.0, 3.0)]}))
    assert "<script>" not in drawn and "p99 &lt;b&gt;" in drawn
    assert drawn.count("<polyline") == 1 and "last 5s" in drawn

