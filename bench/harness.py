"""The benchmark's shared state and steps: the plan, the models and reference answers, starting
a server until its first correct answer, cold starts, and one timed load run with its checks."""

from __future__ import annotations

import dataclasses
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

from bench import measure, models
from bench.servers import SERVERS, Server

CONCURRENCY = (1, 8, 64)
BIG = (1000, 10000)


@dataclasses.dataclass(frozen=True)
class Plan:
    seconds: float  # measured wrk run per scenario
    warmup: float  # unmeasured wrk run before each one
    rounds: int  # every server's load scenarios, servers taking turns, round after round
    cold_starts: int
    big_repeats: int
    floor_repeats: int
    ab_rounds: int  # alternating runs of batched and unbatched mlemu (RandomForest, c=1)
    many_versions: int  # versions in the many-models scenario
    mixed_versions: int = 1000  # versions of mixed frameworks under a memory cap (thousand.py)

    @classmethod
    def of(cls, quick: bool, smoke: bool = False) -> Plan:
        if smoke:  # proves the code runs: seconds per step, figures meaningless
            return cls(2, 1, 1, 1, 1, 1, 1, 12, 16)
        return cls(2, 1, 1, 1, 3, 5, 3, 200) if quick else cls(6, 2, 3, 3, 15, 15, 10, 200)


class Bench:
    def __init__(self, plan: Plan, out: Path, names: list[str]) -> None:
        self.plan = plan
        self.out = out
        self.names = names
        self.models: tuple[str, ...] = tuple(models.MODELS)  # the load and big phases' models
        with_tf = any(models.TF_MODELS[0] in SERVERS[n].models for n in names)
        self.dirs = models.build(out / "models", with_tf=with_tf)
        self.rows = models.instances(64, seed=1)
        self.big = {n: models.instances(n, seed=2) for n in BIG}
        self.want: dict[str, list[Any]] = {}
        self.want_big: dict[tuple[str, int], list[Any]] = {}
        for name in models.PEER_MODELS:
            ref = models.reference(self.dirs[name], name)
            self.want[name] = ref(self.rows)
            for n in BIG:
                self.want_big[name, n] = ref(self.big[n])
        for name in models.TF_MODELS:
            if name in self.dirs:
                self.want[name] = models.tf_reference(self.dirs[name], self.rows)
                for n in BIG:
                    self.want_big[name, n] = models.tf_reference(self.dirs[name], self.big[n])

    def log(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def server(self, name: str) -> Server:
        return SERVERS[name](self.out)

    def correct(self, server: Server, name: str) -> bool:
        status, answer = measure.post(server.url(name), server.body(self.rows[:1]), timeout=5)
        return status == 200 and measure.same(server.predictions(answer), self.want[name][:1])

    def start(self, server: Server, names: tuple[str, ...], tag: str, grpc: bool = False,
              dirs: dict[str, Path] | None = None) -> tuple[Any, float]:
        """Start `server` with the models `names` (or `dirs`); (process, seconds to its first
        correct answer for the first model). Every model must answer correctly before this
        returns."""
        work = self.out / "run" / f"{server.name}-{tag}"
        work.mkdir(parents=True, exist_ok=True)
        server.workdir = work
        dirs = dirs if dirs is not None else {n: self.dirs[n] for n in names}
        proc = server.start(dirs, work / "server.log", grpc=grpc)
        try:
            first = measure.wait_ready(lambda: self.correct(server, names[0]), proc, 300)
            for name in names[1:]:
                measure.wait_ready(lambda n=name: self.correct(server, n), proc, 300)
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

    def body_file(self, server: Server, name: str) -> Path:
        body = self.out / "bodies" / f"{server.name}-{name}.json"
        body.parent.mkdir(parents=True, exist_ok=True)
        body.write_bytes(server.body(self.rows[:1]))
        return body

    def timed_load(self, server: Server, name: str, c: int, seconds: float) -> dict[str, Any]:
        """One wrk run (statuses only), sampled answers checked in full meanwhile."""
        body = self.body_file(server, name)
        label = f"{server.name}/{name}/c={c}"
        with measure.Sampler(lambda rows: (server.url(name), server.body(rows)),
                             server.predictions, self.rows, self.want[name], label) as sampler:
            result = measure.wrk(server.url(name), body, c, seconds)
        result["sampled"] = sampler.checked
        return result

    def one_load(self, server: Server, name: str, c: int) -> dict[str, Any]:
        measure.wrk(server.url(name), self.body_file(server, name), c, self.plan.warmup)
        result = self.timed_load(server, name, c, self.plan.seconds)
        self.log(f"{server.name}/{name}/c={c}: {result['rps']:.0f} rps, p50 "
                 f"{result['p50_us'] / 1e3:.2f} ms, p99 {result['p99_us'] / 1e3:.2f} ms, errors "
                 f"{result['errors']}, {result['sampled']} sampled answers checked")
        return result


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the median over rounds (errors: the sum); the rounds themselves kept."""
    out: dict[str, Any] = {}
    for key in ("rps", "p50_us", "p90_us", "p99_us", "max_us"):
        values = [r[key] for r in runs if key in r]
        if values:
            out[key] = statistics.median(values)
    out["errors"] = sum(r.get("errors", 0) for r in runs)
    out["rounds"] = runs
    return out
