"""`python -m bench [--quick]`: mlemu, Seldon MLServer and KServe side by side (README "Performance").

All servers run at once on the same model files and request bodies; each scenario loads each
server in turn (wrk from 127.0.0.1, bounded in time), so drifting load on a shared machine hits
all of them alike. Cold starts run one server at a time, the servers taking turns. Every answer
is checked against the in-process prediction. Writes bench/results/results-<time>.json (raw)
and bench/RESULTS.md, and prints the ratio table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

from bench import measure, models, report
from bench.servers import SERVERS, VENVS, Server

HERE = Path(__file__).resolve().parent
CONCURRENCY = (1, 8, 64)
BIG = (1000, 10000)


@dataclasses.dataclass(frozen=True)
class Plan:
    seconds: float  # measured wrk run per scenario
    warmup: float  # unmeasured wrk run before each one
    cold_starts: int
    big_repeats: int
    floor_repeats: int
    ab_rounds: int  # alternating runs of batched and unbatched mlemu (RandomForest, c=1)

    @classmethod
    def of(cls, quick: bool) -> Plan:
        return cls(2, 1, 1, 3, 5, 3) if quick else cls(12, 3, 3, 15, 15, 10)


class Bench:
    def __init__(self, plan: Plan, out: Path, names: list[str]) -> None:
        self.plan = plan
        self.out = out
        self.names = names
        self.dirs = models.build(out / "models", with_tf="mlemu" in names)
        self.rows = models.instances(64, seed=1)
        self.big = {n: models.instances(n, seed=2) for n in BIG}
        self.want: dict[str, list[Any]] = {}
        self.want_big: dict[tuple[str, int], list[Any]] = {}
        for name in models.PEER_MODELS:
            ref = models.reference(self.dirs[name], name)
            self.want[name] = ref(self.rows)
            for n in BIG:
                self.want_big[name, n] = ref(self.big[n])
        if "tf" in self.dirs:
            self.want["tf"] = models.tf_reference(self.dirs["tf"], self.rows)

    def log(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def correct(self, server: Server, name: str) -> bool:
        status, answer = measure.post(server.url(name), server.body(self.rows[:1]), timeout=5)
        return status == 200 and measure.same(server.predictions(answer), self.want[name][:1])

    def start(self, server: Server, names: tuple[str, ...], tag: str) -> tuple[Any, float]:
        work = self.out / "run" / f"{server.name}-{tag}"
        work.mkdir(parents=True, exist_ok=True)
        server.workdir = work
        proc = server.start({n: self.dirs[n] for n in names}, work / "server.log")
        try:
            first = measure.wait_ready(lambda: self.correct(server, names[0]), proc, 180)
            for name in names[1:]:
                measure.wait_ready(lambda n=name: self.correct(server, n), proc, 180)
        except Exception:
            measure.stop(proc)
            print((work / "server.log").read_text(errors="replace")[-3000:])
            raise
        return proc, first

    def cold_starts(self, servers: list[Server]) -> dict[str, dict[str, Any]]:
        """Launch to first correct prediction with one scikit-learn model, the servers taking
        turns launch by launch (so a spell of other work on the machine hits them all alike);
        idle memory 2 s after each one's first launch. A server that fails is reported, the
        others go on."""
        times: dict[str, list[float]] = {s.name: [] for s in servers}
        out: dict[str, dict[str, Any]] = {s.name: {} for s in servers}
        for i in range(self.plan.cold_starts):
            for server in servers:
                if "failed" in out[server.name]:
                    continue
                try:
                    proc, first = self.start(server, ("logreg",), f"cold{i}")
                except Exception as exc:  # one broken peer must not lose the others' figures
                    traceback.print_exc()
                    out[server.name]["failed"] = f"{type(exc).__name__}: {exc}"
                    continue
                times[server.name].append(first)
                self.log(f"{server.name}: cold start {first:.2f} s")
                if i == 0:
                    time.sleep(2)
                    out[server.name]["idle_one_sklearn_model"] = measure.memory(proc.pid)
                measure.stop(proc)
        for name, runs in times.items():
            if runs and "failed" not in out[name]:
                out[name].update(cold_start_s=statistics.median(runs), cold_start_runs_s=runs)
        return out

    def one_load(self, server: Server, name: str, c: int) -> dict[str, Any]:
        body = self.out / "bodies" / f"{server.name}-{name}.json"
        body.parent.mkdir(parents=True, exist_ok=True)
        body.write_bytes(server.body(self.rows[:1]))
        label = f"{server.name}/{name}/c={c}"
        measure.wrk(server.url(name), body, server.field, c, self.plan.warmup)
        result = measure.wrk(server.url(name), body, server.field, c, self.plan.seconds)
        result["errors"] = measure.check_wrk(result, self.want[name][:1], label)
        result.pop("firsts")
        self.log(f"{label}: {result['rps']:.0f} rps, p50 {result['p50_us'] / 1e3:.2f} ms, "
                 f"p99 {result['p99_us'] / 1e3:.2f} ms, errors {result['errors']}")
        time.sleep(1)  # the server finishes what wrk left queued before the next one is loaded
        return result

    def big_requests(self, model: str, servers: list[Server], results: dict[str, Any]) -> None:
        """Each large body on every server and in-process (the floor), taking turns call by call
        (measure.interleaved), so that the ratios compare runs made under the same load."""
        for n in BIG:
            body = json.dumps({"instances": self.big[n]}).encode()
            model_alone, full = models.floor_calls(self.dirs[model], model, body)
            clients = {s.name: measure.BigClient(s.url(model), s.body(self.big[n]), s.predictions,
                                                 self.want_big[model, n],
                                                 f"{s.name}/{model}/{n} instances")
                       for s in servers}
            try:
                contestants: dict[str, measure.Contestant] = {
                    name: (client, client.check) for name, client in clients.items()}
                contestants["floor"] = (full, None)
                figures = measure.interleaved(contestants, self.plan.big_repeats)
            finally:
                for client in clients.values():
                    client.close()
            floor = figures.pop("floor")
            alone = measure.interleaved({"model": (model_alone, None)}, self.plan.floor_repeats)
            results["floor"][f"{model}/{n}"] = {"full_s": floor["min_s"],
                                               "model_s": alone["model"]["min_s"]}
            self.log(f"floor/{model}/{n} instances: best {floor['min_s'] * 1e3:.1f} ms")
            for name, figure in figures.items():
                results["servers"][name]["big"].setdefault(model, {})[str(n)] = figure
                self.log(f"{name}/{model}/{n} instances: best {figure['min_s'] * 1e3:.1f} ms, "
                         f"median {figure['median_s'] * 1e3:.1f} ms")

    def run_all(self, results: dict[str, Any]) -> None:
        """Every server up at once (idle ones take no CPU); each scenario runs on each server in
        turn, the order rotating, so drifting load on a shared machine hits all of them alike."""
        running: list[tuple[Server, Any]] = []
        try:
            for name in self.names:
                server = SERVERS[name](self.out)
                res = results["servers"][name]
                if "failed" in res:
                    continue
                try:
                    proc, _ = self.start(server, server.models, "main")
                except Exception as exc:
                    traceback.print_exc()
                    res["failed"] = f"{type(exc).__name__}: {exc}"
                    continue
                running.append((server, proc))
                res["load"], res["big"] = {}, {}
            time.sleep(2)
            for server, proc in running:
                results["servers"][server.name]["memory_idle_all_models"] = measure.memory(proc.pid)
            turn = 0
            for model in models.MODELS:
                serving = [sp for sp in running if model in (sp[0].measured or sp[0].models)]
                for c in CONCURRENCY:
                    turn += 1
                    for server, _ in serving[turn % len(serving):] + serving[:turn % len(serving)]:
                        load = results["servers"][server.name]["load"].setdefault(model, {})
                        load[f"c{c}"] = self.one_load(server, model, c)
                for server, _ in serving:
                    measure.check_distinct(lambda rows, s=server, m=model: (s.url(m), s.body(rows)),
                                           server.predictions, self.rows, self.want[model],
                                           f"{server.name}/{model}/distinct rows")
                if model in models.PEER_MODELS:
                    self.big_requests(model, [s for s, _ in serving if s.full], results)
            for server, proc in running:
                results["servers"][server.name]["memory_after_load"] = measure.memory(proc.pid)
        finally:
            for _, proc in running:
                measure.stop(proc)

    def ab_forest_c1(self) -> dict[str, Any]:
        """RandomForest at c=1, batched and unbatched mlemu side by side, taking turns."""
        servers = [SERVERS["mlemu"](self.out), SERVERS["mlemu-unbatched"](self.out)]
        procs = []
        try:
            for server in servers:
                procs.append(self.start(server, ("forest",), "ab")[0])
            p50s: dict[str, list[float]] = {s.name: [] for s in servers}
            for server in servers:
                body = self.out / "bodies" / f"{server.name}-forest.json"
                body.parent.mkdir(parents=True, exist_ok=True)
                body.write_bytes(server.body(self.rows[:1]))
                measure.wrk(server.url("forest"), body, server.field, 1, self.plan.warmup)
            for i in range(self.plan.ab_rounds):
                for server in servers[i % 2:] + servers[:i % 2]:  # alternate who goes first
                    body = self.out / "bodies" / f"{server.name}-forest.json"
                    result = measure.wrk(server.url("forest"), body, server.field, 1,
                                         max(2.0, self.plan.seconds / 4))
                    if measure.check_wrk(result, self.want["forest"][:1], server.name):
                        raise measure.CheckFailed(f"{server.name}: errors in the A/B run")
                    p50s[server.name].append(result["p50_us"])
        finally:
            for proc in procs:
                measure.stop(proc)
        out = {"batched_p50_us": statistics.median(p50s["mlemu"]),
               "unbatched_p50_us": statistics.median(p50s["mlemu-unbatched"]), "runs": p50s}
        self.log(f"forest c=1 p50 batched {out['batched_p50_us'] / 1e3:.2f} ms, unbatched "
                 f"{out['unbatched_p50_us'] / 1e3:.2f} ms")
        return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short runs (under 5 minutes)")
    parser.add_argument("--servers", help="comma-separated; default: all (quick: without the "
                        "mlemu-* lever variants)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--no-report", action="store_true", help="do not rewrite bench/RESULTS.md")
    args = parser.parse_args()
    default = "mlemu,mlemu-unbatched,mlemu-xgb-allthreads,mlserver,kserve"
    if args.quick:
        default = "mlemu,mlserver,kserve"
    names = [n for n in (args.servers or default).split(",") if n]
    for name in names:
        if name not in SERVERS:
            parser.error(f"unknown server {name!r}; known: {', '.join(SERVERS)}")
        if not name.startswith("mlemu") and not (VENVS / name / "bin").is_dir():
            parser.error(f"{VENVS / name} is missing: run `make bench` (it installs the peers)")
    started = time.time()
    plan = Plan.of(args.quick)
    bench = Bench(plan, args.out, names)
    results: dict[str, Any] = {"quick": args.quick, "plan": dataclasses.asdict(plan),
                               "environment": report.environment(names), "servers": {}}
    results["floor"] = {}
    bench.log("in-process levers")
    results["levers"] = models.levers(bench.dirs["logreg"], bench.big[10000])
    full = []
    for name in names:
        server = SERVERS[name](args.out)
        results["servers"][name] = {"settings": server.settings()}
        if server.full:
            full.append(server)
    bench.log("== cold starts, servers taking turns")
    for name, figures in bench.cold_starts(full).items():
        results["servers"][name].update(figures)
    bench.log("== load, every server up, scenarios in turn")
    bench.run_all(results)
    if "mlemu" in names:
        bench.log("== RandomForest c=1, batched and unbatched mlemu taking turns")
        try:
            results["ab_forest_c1"] = bench.ab_forest_c1()
        except Exception:
            traceback.print_exc()
    results["elapsed_s"] = time.time() - started
    raw = args.out / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    raw.write_text(json.dumps(results, indent=1))
    table = report.table(results)
    print(table)
    print(f"raw figures: {raw}; {results['elapsed_s'] / 60:.1f} min")
    if not args.no_report:
        report.write_results_md(HERE / "RESULTS.md", results, table, raw)


if __name__ == "__main__":
    main()
