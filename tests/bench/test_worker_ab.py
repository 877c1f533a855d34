"""The worker_ab phase's decisions without servers: its schedule within the budget, the
per-concurrency summary of alternating runs, each variant's environment, and its rows in the
targets table judged against the A/A control."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import targets, worker_ab
from bench.__main__ import PHASES, SELF_CONTAINED
from bench.harness import Plan
from core.setting_table import WORKER_OPTIMIZATIONS
from core.settings import Settings


def test_the_phase_runs_by_default_and_can_be_rerun_alone() -> None:
    assert "worker_ab" in PHASES and SELF_CONTAINED["worker_ab"] == "ab_worker"
    assert worker_ab.PAIRS[0] == worker_ab.CONTROL and worker_ab.PAIRS[1:] == WORKER_OPTIMIZATIONS


def test_schedule_fits_the_budget() -> None:
    runs, seconds, warmup = worker_ab.schedule(Plan.of(quick=False))
    assert (runs, seconds, warmup) == (6, 2.0, 1.0)
    load_s = len(worker_ab.PAIRS) * len(worker_ab.CONCURRENCY) * 2 * (runs * seconds + warmup)
    assert load_s <= 400  # of the ~8 minutes: the rest is for 14 server starts
    assert worker_ab.schedule(Plan.of(quick=True)) == (3, 1.0, 1.0)
    assert worker_ab.schedule(Plan.of(quick=False, smoke=True)) == (1, 1.0, 1.0)


def run(rps: float, cpu: float) -> dict[str, Any]:
    return {"rps": rps, "p99_us": 1000.0, "cpu_us_per_request": cpu}


def test_summary_takes_medians_and_counts_turns_on_was_ahead() -> None:
    on = [run(100, 300), run(90, 310), run(120, 290)]
    off = [run(95, 320), run(95, 330), run(80, 300)]
    figures = worker_ab.summary(on, off)
    assert (figures["on_rps"], figures["off_rps"]) == (100, 95)
    assert (figures["on_cpu_us"], figures["off_cpu_us"]) == (300, 320)
    assert (figures["on_ahead"], figures["runs"]) == (2, 3)
    assert figures["on_runs_rps"] == [100, 90, 120]


def test_each_variant_switches_off_only_its_optimization(tmp_path: Path) -> None:
    models = {"logreg": tmp_path / "m"}
    for off, expected in (("", ()), ("drain", ("drain",))):
        server = worker_ab.WorkerVariant(tmp_path, "v", off)
        _, env = server.command(models)
        assert Settings.from_env(env).worker_off == expected
        assert env["MLEMU_WORKER_OFF"] == (off or "none")  # explicit: the bench's env cannot leak


def pair(on: float, off: float, ahead: int = 3) -> dict[str, Any]:
    figures = {"on_rps": on, "off_rps": off, "on_ahead": ahead, "runs": 6, "on_cpu_us": 300.0,
               "off_cpu_us": 330.0}
    return {"c1": figures, "c8": figures}


def cells(table: str, label: str) -> list[str]:
    (line,) = [line for line in table.splitlines() if line.startswith(f"| {label}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_an_optimization_pays_only_beyond_the_a_a_control() -> None:
    results = {"servers": {}, "ab_worker": {"pairs": {
        "control": pair(100.0, 104.0), "pinning": pair(130.0, 100.0, ahead=6),
        "drain": pair(103.0, 100.0)}}}
    table = targets.table(results)
    assert cells(table, "gunicorn worker: A/A control, default vs default, c=1")[3:] == [
        "0.96x", "-", "(not a target)"]
    pinning = cells(table, "gunicorn worker: pinning on vs off, c=8 requests/s")
    assert "on ahead in 6/6 turns" in pinning[0]
    assert pinning[3:] == ["1.30x", ">= 1.04", "yes"]
    assert cells(table, "gunicorn worker: drain on vs off, c=1 requests/s")[3:] == [
        "1.03x", ">= 1.04", "NO"]  # within the control's noise: it does not pay
    assert cells(table, "gunicorn worker: board on vs off, c=1 requests/s")[-1] == "not measured"
    assert cells(table, "gunicorn worker: drain on vs off, c=8 server CPU")[3] == "0.91x"


def test_without_the_control_the_rows_are_shown_not_judged() -> None:
    table = targets.table({"servers": {}, "ab_worker": {"pairs": {"socket": pair(110.0, 100.0)}}})
    assert cells(table, "gunicorn worker: socket on vs off, c=1 requests/s")[3:] == [
        "1.10x", "-", "(not a target)"]
    for name in WORKER_OPTIMIZATIONS:  # every optimization has its rows, measured or not
        assert cells(targets.table({"servers": {}}),
                     f"gunicorn worker: {name} on vs off, c=8 requests/s")[-1] == "not measured"
