"""`python -m bench [--quick]`: mlemu against Seldon MLServer, KServe's model servers and a naive
Flask server (docs/performance.md; method in bench/NOTES.md, "Fair peers").

One server is under load at a time, each started as its users start it with only the model under
test; the servers take turns round after round and the figures are medians over the rounds.
wrk and h2load count statuses only; the answers are checked in full outside the timed runs and
sampled during them. Phases: cold starts, in-process levers, one-row load (REST), the
RandomForest c=1 batching A/B, metrics on/off, each model's c=8 p99 against the peer with the
lowest (taking turns; the peer chosen from the load phase), Vertex AI endpoints.predict against
ml v1 :predict (one server, taking turns), each gunicorn-worker optimization on/off (taking
turns), large requests against the in-process floor (TensorFlow too), V2 gRPC, many models, batch
jobs and the demo's memory (what `make serve` starts). Writes bench/results/results-<time>.json
(raw) and bench/RESULTS.md, and prints the ratio and target tables.

`--into RAW --phases P` re-runs self-contained phases (their figures are one key of the raw
results: levers, ab, metrics_ab, tail_ab, vertex, worker_ab, many, batch, demo) and writes them
into an earlier run's raw file, e.g. after a change that only those phases measure; RESULTS.md
then says which phases were re-run, when, at which commit and with which command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import batch, big, demo, grpc_load, load, many, models, report, vertex, worker_ab
from bench.harness import Bench, Plan
from bench.servers import SERVERS, VENVS

HERE = Path(__file__).resolve().parent
PHASES = ("cold", "levers", "load", "ab", "metrics_ab", "tail_ab", "vertex", "worker_ab", "big",
          "grpc", "many", "batch", "demo")
#: Phases whose figures are one key of the raw results (`--into` can replace them alone).
SELF_CONTAINED = {"levers": "levers", "ab": "ab_forest_c1", "metrics_ab": "ab_metrics",
                  "tail_ab": "ab_tail", "vertex": "ab_vertex", "worker_ab": "ab_worker",
                  "many": "many", "batch": "batch", "demo": "demo"}
DEFAULT = ("mlemu,mlemu-threads8,mlemu-unbatched,mlemu-xgb-allthreads,mlemu-nometrics,mlserver,"
           "kserve,flask")
QUICK = "mlemu,mlserver,kserve,flask"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one short round (minutes)")
    parser.add_argument("--smoke", action="store_true",
                        help="seconds per step, 12 versions for many models: proves the code "
                        "runs, figures meaningless (RESULTS.md is not rewritten)")
    parser.add_argument("--servers", help=f"comma-separated; default: {DEFAULT} (quick: {QUICK})")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated, of {', '.join(PHASES)}")
    parser.add_argument("--models", help="comma-separated models for the load and big phases "
                        f"(default: all of {', '.join(models.MODELS)})")
    parser.add_argument("--rounds", type=int, help="load rounds (overrides the plan's)")
    parser.add_argument("--seconds", type=float, help="seconds per measured wrk run (overrides)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--into", type=Path, metavar="RAW",
                        help="write the figures of the --phases run (only "
                        f"{', '.join(SELF_CONTAINED)}) into this earlier raw results file")
    parser.add_argument("--no-report", action="store_true", help="do not rewrite bench/RESULTS.md")
    args = parser.parse_args()
    names = [n for n in (args.servers or (QUICK if args.quick or args.smoke else DEFAULT)).split(",")
             if n]
    phases = [p for p in args.phases.split(",") if p]
    for name in names:
        if name not in SERVERS:
            parser.error(f"unknown server {name!r}; known: {', '.join(SERVERS)}")
        if name in ("mlserver", "kserve") and not (VENVS / name / "bin").is_dir():
            parser.error(f"{VENVS / name} is missing: run `make bench` (it installs the peers)")
    for phase in phases:
        if phase not in PHASES:
            parser.error(f"unknown phase {phase!r}; known: {', '.join(PHASES)}")
        if args.into and phase not in SELF_CONTAINED:
            parser.error(f"--into takes only self-contained phases ({', '.join(SELF_CONTAINED)}): "
                         f"{phase!r} measures per server; run it in a full run")
    if args.into and not args.into.is_file():
        parser.error(f"--into: {args.into} is not a raw results file")
    started = time.time()
    plan = Plan.of(args.quick, args.smoke)
    if args.rounds:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    if args.seconds:
        plan = dataclasses.replace(plan, seconds=args.seconds)
    bench = Bench(plan, args.out, names)
    if args.models:
        bench.models = tuple(m for m in models.MODELS if m in args.models.split(","))
    command = shlex.join(["python", "-m", "bench", *sys.argv[1:]])
    results: dict[str, Any] = {"quick": args.quick, "smoke": args.smoke, "command": command,
                               "plan": dataclasses.asdict(plan), "phases": phases,
                               "environment": report.environment(names), "servers": {},
                               "floor": {}}
    for name in names:
        results["servers"][name] = {"settings": SERVERS[name](args.out).settings()}

    def phase(name: str, run: Callable[[], None]) -> None:
        if name not in phases:
            return
        bench.log(f"== {name}")
        try:
            run()
        except Exception:  # a broken phase must not lose the others' figures
            traceback.print_exc()
            results.setdefault("failed_phases", []).append(name)

    def cold() -> None:
        full = [bench.server(n) for n in names if bench.server(n).full]
        for name, figures in bench.cold_starts(full).items():
            results["servers"][name].update(figures)

    phase("cold", cold)
    phase("levers", lambda: results.update(
        levers=models.levers(bench.dirs["logreg"], bench.big[10000])))
    phase("load", lambda: load.load_rounds(bench, results))
    if "mlemu" in names and "mlemu-unbatched" in names:
        phase("ab", lambda: results.update(ab_forest_c1=load.ab_forest_c1(bench)))
    if "mlemu" in names and "mlemu-nometrics" in names:
        phase("metrics_ab", lambda: results.update(ab_metrics=load.ab_metrics(bench)))
    # The peer each model's p99 is compared with comes from the load phase: this run's, or with
    # --into the earlier run's.
    loaded = json.loads(args.into.read_text()) if args.into else results
    phase("tail_ab", lambda: results.update(ab_tail=load.ab_tail(bench, loaded)))
    if "mlemu" in names:
        phase("vertex", lambda: results.update(ab_vertex=vertex.vertex_ab(bench)))
        # Each gunicorn-worker optimization on against off, and an A/A control (issue 31).
        phase("worker_ab", lambda: results.update(ab_worker=worker_ab.worker_ab(bench)))
    phase("big", lambda: big.big_requests(bench, results))
    phase("grpc", lambda: grpc_load.grpc_load(bench, results))
    if "mlemu" in names:
        phase("many", lambda: results.update(many=many.many_models(bench)))
        # Batch prediction jobs (issue 19): 1 and 2 workers against the in-process floor.
        size, rounds = (20_000, 1) if args.smoke else (100_000, 1) if args.quick else (1_000_000, 3)
        phase("batch", lambda: results.update(batch=batch.measure_all(args.out, size, rounds)))
        phase("demo", lambda: results.update(demo=demo.demo_memory(args.out, bench.log)))
    results["elapsed_s"] = time.time() - started
    if args.into:
        results = merged_into(json.loads(args.into.read_text()), results, phases)
    raw = args.out / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    raw.write_text(json.dumps(results, indent=1))
    table = report.table(results)
    print(table)
    print(f"raw figures: {raw}; {results['elapsed_s'] / 60:.1f} min")
    if not (args.no_report or args.smoke):
        report.write_results_md(HERE / "RESULTS.md", results, table, raw)


def merged_into(earlier: dict[str, Any], rerun: dict[str, Any], phases: list[str]) -> dict[str, Any]:
    """The earlier run's results with the re-run phases' figures in place of its own, and a
    record of the re-run (RESULTS.md states it)."""
    merged = dict(earlier)
    for phase in phases:
        key = SELF_CONTAINED[phase]
        if key in rerun:
            merged[key] = rerun[key]
        else:
            merged.pop(key, None)
            merged.setdefault("failed_phases", []).append(phase)
    merged["reruns"] = [*earlier.get("reruns", []), {
        "phases": phases, "command": rerun["command"], "elapsed_s": rerun["elapsed_s"],
        "date_utc": rerun["environment"]["date_utc"],
        "mlemu_commit": rerun["environment"]["mlemu_commit"]}]
    return merged


if __name__ == "__main__":
    main()
