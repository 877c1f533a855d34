"""The controls' decisions as functions: rule validation, seeded draws and count limits, delays,
timing verdicts, the journal's bounds and filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controls import Controls
from controls.faults import fault_error
from controls.journal import Journal
from controls.rules import MAX_DELAY_MS, parse_rule
from controls.timing import parse_timing
from core.errors import ApiError, InvalidArgument, ResourceExhausted, Unavailable
from tests.kit import journalkit


@pytest.mark.parametrize("rule, words", [
    ({"match": {}}, "needs an error, a delayMs or a delay"),
    ({"error": {"status": "NOPE"}}, "not a google.rpc.Code"),
    ({"error": {"status": "OK"}}, "not a google.rpc.Code"),
    ({"error": {"code": 99}}, "error.code must be an integer from 400 to 599"),
    ({"delayMs": MAX_DELAY_MS + 1}, "delayMs must be a number"),
    ({"delayMs": float("nan")}, "delayMs must be a number"),
    ({"delayMs": 5, "delay": {"distribution": "exponential", "meanMs": 1}}, "not both"),
    ({"delay": {"distribution": "normal"}}, "delay must be"),
    ({"error": {"status": "ABORTED"}, "probability": 1.5}, "probability must be"),
    ({"error": {"status": "ABORTED"}, "times": 0}, "times must be an integer"),
    ({"error": {"status": "ABORTED"}, "match": {"colour": "red"}}, "match must be an object"),
    ({"error": {"status": "ABORTED"}, "match": {"model": ""}}, "match.model must be"),
    ({"error": {"status": "ABORTED"}, "extra": 1}, "unknown fields ['extra']"),
    ({"error": {"status": "ABORTED", "message": "x" * 3000}}, "error.message must be"),
    ({"error": {"status": "ABORTED", "details": [{"a": "x" * 9000}]}}, "error.details must be"),
    ([], "must be a JSON object"),
])
def test_a_bad_rule_is_refused_with_what_is_wrong(rule: Any, words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_rule(rule, "1")
    assert words in caught.value.message


def test_an_http_code_alone_names_its_canonical_status() -> None:
    rule = parse_rule({"error": {"code": 429}}, "1")
    assert rule.error is not None and rule.error["status"] == "RESOURCE_EXHAUSTED"
    assert "details" not in rule.error  # the answering API's defaults, chosen per request
    details = fault_error(rule.error).details
    assert [d["@type"].rsplit(".", 1)[1] for d in details] == ["ErrorInfo", "QuotaFailure", "Help"]
    assert details[0]["metadata"]["service"] == "ml.googleapis.com"
    unavailable = parse_rule({"error": {"code": 503}}, "1").error
    assert unavailable is not None and fault_error(unavailable).details == []


def test_a_quota_fault_names_the_api_the_request_went_to() -> None:
    error = parse_rule({"error": {"code": 429, "message": "Slow down."}}, "1").error
    assert error is not None
    [info, failure, help_] = fault_error(error, "vertex", "predict").details
    assert info["metadata"] == {
        "service": "aiplatform.googleapis.com",
        "quota_metric": "aiplatform.googleapis.com/online_prediction_requests"}
    assert failure["violations"] == [{"subject": "project", "description": "Slow down."}]
    assert help_["links"][0]["url"] == "https://cloud.google.com/vertex-ai/docs/quotas"
    upload = fault_error(error, "vertex", "models.upload").details[0]
    assert upload["metadata"] == {"service": "aiplatform.googleapis.com"}
    ml = fault_error(error, "ml", "predict").details[0]["metadata"]
    assert ml["quota_metric"] == "ml.googleapis.com/online_prediction_requests"
    given = parse_rule({"error": {"code": 429, "details": []}}, "1").error
    assert given is not None and fault_error(given, "vertex", "predict").details == []


def test_seeded_draws_repeat_and_differ_by_seed() -> None:
    one = parse_rule({"error": {"status": "ABORTED"}, "probability": 0.3, "seed": 1}, "1")
    again = parse_rule({"error": {"status": "ABORTED"}, "probability": 0.3, "seed": 1}, "9")
    other = parse_rule({"error": {"status": "ABORTED"}, "probability": 0.3, "seed": 2}, "1")
    first = [one.fires(n) for n in range(1, 200)]
    assert first == [again.fires(n) for n in range(1, 200)]
    assert first != [other.fires(n) for n in range(1, 200)]
    assert 30 < sum(first) < 90  # about 30 %


def test_delays_fixed_uniform_and_exponential_stay_in_bounds() -> None:
    assert parse_rule({"delayMs": 250}, "1").wait_ms(1) == 250
    uniform = parse_rule({"delay": {"distribution": "uniform", "minMs": 10, "maxMs": 20},
                          "seed": 3}, "1")
    assert all(10 <= uniform.wait_ms(n) <= 20 for n in range(1, 100))
    exponential = parse_rule({"delay": {"distribution": "exponential", "meanMs": 5000},
                              "seed": 3}, "1")
    waits = [exponential.wait_ms(n) for n in range(1, 300)]
    assert all(0 <= w <= MAX_DELAY_MS for w in waits) and len(set(waits)) > 250


@pytest.fixture
def controls(tmp_path: Path) -> Controls:
    waited: list[float] = []
    made = Controls(tmp_path, sleep=waited.append)
    made.waited = waited  # type: ignore[attr-defined]
    return made


def test_times_limits_firings_and_a_used_rule_stops_matching(controls: Controls) -> None:
    controls.faults.add({"match": {"model": "m"}, "error": {"code": 429}, "times": 2,
                         "delayMs": 40})
    outcomes = []
    for _ in range(4):
        try:
            controls.check("p", "m", "v1")
            outcomes.append("ok")
        except ResourceExhausted:
            outcomes.append("429")
    assert outcomes == ["429", "429", "ok", "ok"]
    assert controls.waited == [0.04, 0.04]  # type: ignore[attr-defined]
    assert [r["hits"] for r in controls.faults.list()] == [2]
    assert controls.faults.live() == ()  # used up: no longer evaluated at all
    controls.check("p", "other", "v1")


def test_a_delay_only_rule_waits_and_serves(controls: Controls) -> None:
    controls.faults.add({"match": {"project": "p"}, "delayMs": 120})
    controls.check("p", "m", "v1")
    controls.check("q", "m", "v1")
    assert controls.waited == [0.12]  # type: ignore[attr-defined]


def test_rules_are_bounded_and_deleted_by_id(controls: Controls) -> None:
    ids = [controls.faults.add({"error": {"status": "ABORTED"}})["id"] for _ in range(100)]
    with pytest.raises(InvalidArgument, match="already holds 100"):
        controls.faults.add({"error": {"status": "ABORTED"}})
    controls.faults.delete(ids[0])
    with pytest.raises(ApiError, match="no fault rule"):
        controls.faults.delete(ids[0])
    with pytest.raises(ApiError, match="no fault rule"):
        controls.faults.delete("../1")
    assert len(controls.faults.list()) == 99


def test_a_second_process_view_sees_rule_changes_at_once(tmp_path: Path) -> None:
    first, second = Controls(tmp_path), Controls(tmp_path)
    second.check("p", "m", "v")
    first.faults.add({"error": {"status": "UNAVAILABLE"}})
    with pytest.raises(Unavailable):
        second.check("p", "m", "v")
    first.faults.clear()
    second.check("p", "m", "v")


def test_timing_verdicts(controls: Controls) -> None:
    timing = controls.timing
    assert timing.hold("CREATE_VERSION", "op", 0.0) is None  # no rule: at once
    timing.put({"operationType": "CREATE_VERSION", "after": {"seconds": 10}})
    assert timing.hold("CREATE_VERSION", "op", 0.0) == 0.25
    assert timing.hold("CREATE_VERSION", "op", 9.9) == pytest.approx(0.1)
    assert timing.hold("CREATE_VERSION", "op", 10.0) is None
    timing.put({"operationType": "CREATE_VERSION", "after": {"polls": 2},
                "fail": {"code": 9, "message": "no quota"}})
    assert isinstance(timing.hold("CREATE_VERSION", "op", 0.0), float)
    timing.polled("op")
    timing.polled("op")
    failed = timing.hold("CREATE_VERSION", "op", 0.0)
    assert isinstance(failed, ApiError) and failed.code.name == "FAILED_PRECONDITION"
    assert failed.message == "no quota"
    assert [r["operationType"] for r in timing.list()] == ["CREATE_VERSION"]
    controls.reset()
    assert timing.list() == [] and timing.polls("op") == 0


@pytest.mark.parametrize("rule", [
    {"operationType": "x y"}, {"operationType": "A", "after": {"seconds": -1}},
    {"operationType": "A", "after": {"polls": 1.5}}, {"operationType": "A", "after": {}},
    {"operationType": "A", "fail": {"code": "OK"}}, {"operationType": "A", "fail": {"code": 99}},
    {"operationType": "A", "later": 1},
])
def test_a_bad_timing_rule_is_refused(rule: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument, match="Invalid timing rule"):
        parse_timing(rule)


def test_the_journal_is_bounded_in_rows_and_bytes(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j", max_rows=50, max_bytes=20_000)
    for n in range(400):
        journal.record(journalkit.row(n))
    files = list((tmp_path / "j").iterdir())
    assert sum(f.stat().st_size for f in files) <= 2 * 20_000
    rows = journal.entries({})
    assert len(rows) == 50 and rows[-1]["timestamp"] == 1_399.0
    assert [r["timestamp"] for r in rows] == sorted(r["timestamp"] for r in rows)


def test_the_journal_filters_and_clears(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    journal.record(journalkit.row(1))
    journal.record(journalkit.row(2, model="other", status=429))
    journal.record(journalkit.row(3))
    assert [r["timestamp"] for r in journal.entries({"model": "m"})] == [1_001.0, 1_003.0]
    assert [r["model"] for r in journal.entries({"status": "429"})] == ["other"]
    assert len(journal.entries({}, since=1_002.0)) == 2
    assert len(journal.entries({}, limit=1)) == 1
    journal.clear()
    assert journal.entries({}) == []
    journal.record(journalkit.row(4))  # the writer goes on in the same file: only what came before is gone
    assert len(journal.entries({})) == 1
