"""Phase `worker_ab`: each optimization of mlemu's gunicorn worker on against off (issue 31:
"keep it only if `make bench` shows it pays").

For each optimization (core/setting_table.py WORKER_OPTIMIZATIONS, deploy/tuning.py says what
each does) two mlemu servers are up side by side, one at its defaults and one with only that
optimization off (MLEMU_WORKER_OFF), and one-row LogisticRegression runs at c=1 and c=8 take
turns between them, who goes first alternating (the idle one takes no CPU): a drift in the
machine's speed, which on a shared machine is larger than most of these optimizations are worth,
then hits both sides alike. The A/A control is the same with two default servers: its ratio is
what this method shows for no difference at all, so an optimization pays only if its ratio
beats the control's (bench/targets.py `worker_checks`). Every answer is checked as in the load
phase (the first, sampled ones during each run); each run also records the server's CPU time per
request (its process tree's, from /proc), which the machine's other work moves far less than its
requests/s.
"""

from __future__ import annotations

import os
import statistics
import traceback
from pathlib import Path
from typing import Any

from bench import measure
from bench.harness import Bench, Plan
from bench.servers import Mlemu
from core.setting_table import WORKER_OPTIMIZATIONS

MODEL = "logreg"
CONCURRENCY = (1, 8)
#: The pair of two default servers.
CONTROL = "control"
PAIRS = (CONTROL, *WORKER_OPTIMIZATIONS)


class WorkerVariant(Mlemu):
    """mlemu at its defaults with the worker optimizations `off` switched off ("" : none)."""

    full = False

    def __init__(self, workdir: Path, name: str, off: str) -> None:
        super().__init__(workdir)
        self.name = name
        self.off = off

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        argv, env = super().command(model_dirs)
        # Explicit either way, so a MLEMU_WORKER_OFF in the bench's own environment changes nothing.
        return argv, {**env, "MLEMU_WORKER_OFF": self.off or "none"}

    def settings(self) -> str:
        return f"as mlemu, with MLEMU_WORKER_OFF={self.off or 'none'}"


def schedule(plan: Plan) -> tuple[int, float, float]:
    """(runs per side and concurrency, seconds per run, warm-up seconds): at the default plan
    6 runs of 2 s, so the phase's load is 7 pairs x 2 concurrencies x 2 sides x (6 x 2 + 1) s,
    about 6 minutes, plus 14 server starts: ~8 minutes in all."""
    return min(6, plan.ab_rounds), min(2.0, max(1.0, plan.seconds / 2)), min(1.0, plan.warmup)


def summary(on: list[dict[str, Any]], off: list[dict[str, Any]]) -> dict[str, Any]:
    """One concurrency's figures from its runs, run i of `on` taken in turn with run i of `off`:
    median requests/s, p99 and CPU per request each side, and in how many turns `on` was ahead."""
    def median(runs: list[dict[str, Any]], key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(values) if values else None

    return {"on_rps": median(on, "rps"), "off_rps": median(off, "rps"),
            "on_p99_us": median(on, "p99_us"), "off_p99_us": median(off, "p99_us"),
            "on_cpu_us": median(on, "cpu_us_per_request"),
            "off_cpu_us": median(off, "cpu_us_per_request"),
            "on_ahead": sum(a["rps"] > b["rps"] for a, b in zip(on, off, strict=True)),
            "runs": len(on), "on_runs_rps": [r["rps"] for r in on],
            "off_runs_rps": [r["rps"] for r in off]}


def _timed(bench: Bench, server: Mlemu, pid: int, c: int, seconds: float) -> dict[str, Any]:
    cpu = measure.cpu_seconds(pid)
    result = bench.timed_load(server, MODEL, c, seconds)
    result["cpu_us_per_request"] = ((measure.cpu_seconds(pid) - cpu) * 1e6
                                    / max(1, result["requests"]))
    if result["errors"]:
        raise measure.CheckFailed(f"{server.name}/c={c}: {result['errors']} errors")
    return result


def one_pair(bench: Bench, optimization: str) -> dict[str, Any]:
    """Both servers of one pair up, the concurrencies' runs taking turns; the pair's figures."""
    on = WorkerVariant(bench.out, f"worker-{optimization}-on", "")
    off = WorkerVariant(bench.out, f"worker-{optimization}-off",
                        "" if optimization == CONTROL else optimization)
    runs, seconds, warmup = schedule(bench.plan)
    procs: dict[str, Any] = {}
    out: dict[str, Any] = {"load_average": [round(os.getloadavg()[0], 2)]}
    try:
        for server in (on, off):
            procs[server.name] = bench.start(server, (MODEL,), "worker-ab")[0]
        for c in CONCURRENCY:
            for server in (on, off):
                measure.wrk(server.url(MODEL), bench.body_file(server, MODEL), c, warmup)
            taken: dict[str, list[dict[str, Any]]] = {on.name: [], off.name: []}
            for i in range(runs):
                for server in ((on, off) if i % 2 == 0 else (off, on)):
                    taken[server.name].append(
                        _timed(bench, server, procs[server.name].pid, c, seconds))
            out[f"c{c}"] = summary(taken[on.name], taken[off.name])
    finally:
        for proc in procs.values():
            measure.stop(proc)
    out["load_average"].append(round(os.getloadavg()[0], 2))
    return out


def worker_ab(bench: Bench) -> dict[str, Any]:
    """Every pair in turn (the A/A control first); a pair that fails is logged and left out."""
    runs, seconds, _ = schedule(bench.plan)
    out: dict[str, Any] = {"runs_per_side": runs, "seconds_per_run": seconds, "pairs": {}}
    for optimization in PAIRS:
        try:
            pair = out["pairs"][optimization] = one_pair(bench, optimization)
        except Exception:  # one pair's failure must not lose the others' figures
            traceback.print_exc()
            out.setdefault("failed", []).append(optimization)
            continue
        for c in CONCURRENCY:
            f = pair[f"c{c}"]
            bench.log(f"worker {optimization} c={c}: on {f['on_rps']:.0f} rps, off "
                      f"{f['off_rps']:.0f} rps ({f['on_rps'] / f['off_rps']:.2f}x, on ahead "
                      f"{f['on_ahead']}/{f['runs']}); CPU per request on {f['on_cpu_us']:.0f} us, "
                      f"off {f['off_cpu_us']:.0f} us; load {pair['load_average']}")
    return out
