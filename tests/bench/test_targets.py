"""The targets table (bench/targets.py) and figures table (bench/report.py): every row the scale
issue and the Vertex AI target ask for is listed, unmeasured ones say so, and measured ones are
judged against their bound."""

from __future__ import annotations

from typing import Any

from bench import report, targets


def _row(table: str, label: str) -> list[str]:
    """The cells of the targets table's row whose label starts with `label`."""
    lines = [line for line in table.splitlines() if line.startswith(f"| {label}")]
    assert len(lines) == 1, (label, lines)
    return [cell.strip() for cell in lines[0].strip("|").split("|")]


SCALE_ROWS = (
    "batch job, 2 workers, instances/s vs 1 worker (wall clock)",
    "batch job, 1 worker, instances/s vs in-process floor",
    "1000 versions: time to ready s vs one model",
    "1000 versions: PSS after load MiB vs the memory cap",
    "1000 versions: reload of an evicted version s vs its first load",
    "1000 versions: spread c=8 p50 ms vs one model",
    "1000 versions: models.list p50 ms (absolute)",
    "LogisticRegression c=1 requests/s, metrics on vs off",
    "demo (`make serve`) idle PSS MiB",
    "Vertex AI endpoints.predict c=8 requests/s vs ml v1 :predict",
)


def test_every_row_is_listed_and_unmeasured_rows_say_so() -> None:
    table = targets.table({"servers": {}})
    for label in SCALE_ROWS:
        assert _row(table, label)[-1] == "not measured", label


def test_bounds_are_the_issues() -> None:
    table = targets.table({"servers": {}})
    goals = {label: _row(table, label)[4] for label in SCALE_ROWS}
    assert goals["batch job, 2 workers, instances/s vs 1 worker (wall clock)"] == ">= 1.6"
    assert goals["batch job, 1 worker, instances/s vs in-process floor"] == ">= 0.8"
    assert goals["1000 versions: time to ready s vs one model"] == "<= 3.0"
    assert goals["1000 versions: reload of an evicted version s vs its first load"] == "<= 1.1"
    assert goals["1000 versions: spread c=8 p50 ms vs one model"] == "<= 1.2"
    assert goals["1000 versions: models.list p50 ms (absolute)"] == "< 20.0"
    assert goals["demo (`make serve`) idle PSS MiB"] == "<= 0.6"
    assert goals["Vertex AI endpoints.predict c=8 requests/s vs ml v1 :predict"] == ">= 0.9"


def _vertex(vertex_rps: float, v1_rps: float) -> dict[str, Any]:
    return {"servers": {}, "ab_vertex": {
        "vertex": {"rps": vertex_rps, "p50_us": 2000, "p99_us": 9000, "errors": 0,
                   "cpu_us_per_request": 500},
        "ml-v1": {"rps": v1_rps, "p50_us": 1800, "p99_us": 8000, "errors": 0,
                  "cpu_us_per_request": 400}}}


def test_vertex_row_is_judged_against_ml_v1() -> None:
    label = "Vertex AI endpoints.predict c=8 requests/s vs ml v1 :predict"
    met = _row(targets.table(_vertex(905, 1000)), label)
    assert met[1:4] == ["905", "1000", "0.91x"] and met[-1] == "yes"
    assert _row(targets.table(_vertex(880, 1000)), label)[-1] == "NO"
    p99 = _row(targets.table(_vertex(905, 1000)), "Vertex AI endpoints.predict c=8 p99 ms")
    assert p99[1:4] == ["9.00", "8.00", "1.12x"] and p99[-1] == "(not a target)"
    cpu = _row(targets.table(_vertex(905, 1000)), "Vertex AI endpoints.predict c=8 server CPU")
    assert cpu[1:4] == ["0.50", "0.40", "1.25x"] and cpu[-1] == "(not a target)"


def test_vertex_figures_appear_in_the_figures_table() -> None:
    labels = {row[0]: row[2].get("mlemu") for row in report.rows(_vertex(905, 1000))}
    assert labels["Vertex AI endpoints.predict logreg c=8 requests/s (one server, routes taking "
                  "turns)"] == 905
    assert labels["ml v1 :predict logreg c=8 p99 ms (one server, routes taking turns)"] == 8.0


def test_demo_row_is_judged_against_0_6_of_1277_mib() -> None:
    def demo(idle: float) -> dict[str, Any]:
        return {"servers": {}, "demo": {"idle": {"pss_mib": idle, "rss_mib": idle * 2,
                                                 "processes": 5},
                                        "after_requests": {"pss_mib": idle + 50}}}

    label = "demo (`make serve`) idle PSS MiB"
    assert _row(targets.table(demo(760)), label)[3:] == ["0.60x", "<= 0.6", "yes"]
    assert _row(targets.table(demo(780)), label)[3:] == ["0.61x", "<= 0.6", "NO"]
    figures = {row[0]: row[2].get("mlemu") for row in report.rows(demo(760))}
    assert figures["demo (`make serve`) processes"] == 5
    assert figures["demo (`make serve`) PSS after one request per version MiB"] == 810


def test_many_rows_read_the_many_phase() -> None:
    many = {"versions": 1000, "cap_mib": 1000.0,
            "one": {"ready_s": 2.0, "load_c8": {"p50_us": 1000}},
            "all": {"ready_s": 5.0, "load_c8": {"p50_us": 1100},
                    "memory_after_load": {"pss_mib": 900.0}},
            "reload": {"first_s": 0.10, "reload_s": 0.12}, "list_p50_us": 8000}
    table = targets.table({"servers": {}, "many": many})
    assert _row(table, "1000 versions: time to ready")[3:] == ["2.50x", "<= 3.0", "yes"]
    assert _row(table, "1000 versions: PSS after load")[3:] == ["0.90x", "<= 1.0", "yes"]
    assert _row(table, "1000 versions: reload")[3:] == ["1.20x", "<= 1.1", "NO"]
    assert _row(table, "1000 versions: spread")[3:] == ["1.10x", "<= 1.2", "yes"]
    assert _row(table, "1000 versions: models.list")[1:] == ["8.00", "1.00", "8.00x", "< 20.0",
                                                             "yes"]
