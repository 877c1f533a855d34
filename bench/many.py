"""Many models: mlemu serving N scikit-learn LogisticRegression versions (200 in the full run)
from one bootstrap file, against the same server with one of them.

For each layout: time from launch to ready (/readyz answers 200, which waits for warm-up to load
every bootstrap version in the process answering, and a correct prediction from the last
version), idle PSS 2 s later, one-row c=8 latency with the requests spread over every version in
turn (post.lua with BENCH_PATHS), every version's answer checked in full before and after the
load and sampled during it, and PSS after the load. `one` and `all` are up side by side and take
turns, Plan.ab_rounds runs each (the figures: medians over the runs); `capped` runs alone.
Layouts:
- one: the first version only;
- all: all N (the default MLEMU_MAX_LOADED_VERSIONS, 256, holds them all);
- capped: all N with MLEMU_MAX_LOADED_VERSIONS = N/2 and the same spread traffic, so nearly
  every request reloads its version: the cost of the memory bound when the working set does not
  fit (the worst case, not a typical one).
PSS per extra loaded version = (PSS all - PSS one) / (N - 1), after the load (every version has
then been used in every worker).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import measure, models
from bench.harness import Bench, median_run
from bench.servers import Mlemu


def build(root: Path, n: int) -> dict[str, Path]:
    """n LogisticRegression versions, each fit on its own bootstrap sample of the training data
    (different coefficients, same size as a user's retrains of one model)."""
    import joblib
    from sklearn.linear_model import LogisticRegression

    x, y = models.training_data()
    dirs = {}
    for i in range(n):
        d = root / f"m{i:03d}"
        if not (d / "model.joblib").exists():
            d.mkdir(parents=True, exist_ok=True)
            pick = np.random.default_rng(i).integers(0, len(x), len(x))
            joblib.dump(LogisticRegression(max_iter=1000).fit(x[pick], y[pick]), d / "model.joblib")
        dirs[f"m{i:03d}"] = d
    return dirs


def many_models(bench: Bench) -> dict[str, Any]:
    n = bench.plan.many_versions
    dirs = build(bench.out / "models" / "many", n)
    row = bench.rows[0]
    want = {name: models.reference(d, "logreg")([row]) for name, d in dirs.items()}
    first = next(iter(dirs))
    out: dict[str, Any] = {"versions": n}
    # one and all: both up, taking turns run by run (the spread p50 target compares them, and this
    # machine's speed drifts more between runs minutes apart than the 10 % judged).
    pair = [_Layout(bench, "one", {first: dirs[first]}, {}, row, want),
            _Layout(bench, "all", dirs, {}, row, want)]
    try:
        for layout in pair:
            layout.start()
        for layout in pair:
            layout.warm()
        runs: dict[str, list[dict[str, Any]]] = {layout.name: [] for layout in pair}
        for i in range(bench.plan.ab_rounds):
            for layout in pair[i % 2:] + pair[:i % 2]:
                runs[layout.name].append(layout.load(max(1.0, bench.plan.seconds / 2)))
        for layout in pair:
            out[layout.name] = layout.finish(median_run(runs[layout.name]))
    finally:
        for layout in pair:
            layout.stop()
    # capped: alone (its figure is the cost of the bound, not compared within 10 %).
    capped = _Layout(bench, "capped", dirs, {"MLEMU_MAX_LOADED_VERSIONS": str(n // 2)}, row, want)
    try:
        capped.start()
        capped.warm()
        out["capped"] = capped.finish(capped.load(bench.plan.seconds))
    finally:
        capped.stop()
    one, full = out["one"]["memory_after_load"], out["all"]["memory_after_load"]
    out["pss_per_extra_version_mib"] = (full["pss_mib"] - one["pss_mib"]) / max(1, n - 1)
    bench.log(f"many models: PSS per extra loaded version "
              f"{out['pss_per_extra_version_mib']:.2f} MiB")
    # A thousand versions of mixed frameworks under a memory cap (bench/thousand.py).
    from bench import thousand

    out["thousand"] = thousand.run(bench)
    return out


class _Env(Mlemu):
    """mlemu with extra environment (the cap) for one layout."""

    name = "mlemu"

    def __init__(self, workdir: Path, extra: dict[str, str]) -> None:
        super().__init__(workdir)
        self.extra = extra

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        argv, env = super().command(model_dirs)
        return argv, {**env, **self.extra}


class _Layout:
    """One mlemu serving `dirs`: started and timed to ready, then loaded with the requests spread
    over every version in turn (as often as asked), then checked and measured again."""

    def __init__(self, bench: Bench, name: str, dirs: dict[str, Path], env: dict[str, str],
                 row: list[float], want: dict[str, list[Any]]) -> None:
        self.bench, self.name, self.dirs, self.want = bench, name, dirs, want
        self.server = _Env(bench.out, env)
        self.names = list(dirs)
        self.work = bench.out / "run" / f"many-{name}"
        self.work.mkdir(parents=True, exist_ok=True)
        self.server.workdir = self.work
        self.row = row
        self.body = json.dumps({"instances": [row]}).encode()
        self.proc: subprocess.Popen[bytes] | None = None
        self.result: dict[str, Any] = {}
        self.spread = {"BENCH_PATHS": str(self.work / "paths.txt")}
        self.body_file = self.work / "body.json"

    def answers(self, name: str) -> bool:
        status, answer = measure.post(self.server.url(name), self.body, timeout=10)
        return status == 200 and measure.same(answer["predictions"], self.want[name])

    def start(self) -> None:
        def ready() -> bool:
            return measure.get_status(f"http://127.0.0.1:{self.server.port}/readyz") == 200 \
                and self.answers(self.names[-1])

        self.proc = self.server.start(self.dirs, self.work / "server.log")
        self.result["ready_s"] = measure.wait_ready(ready, self.proc, 600)
        time.sleep(2)
        self.result["memory_idle"] = measure.memory(self.proc.pid)
        _check_every(self.names, self.answers, f"many/{self.name} before the load")
        (self.work / "paths.txt").write_text(
            "".join(f"/v1/projects/bench/models/{name}:predict\n" for name in self.names))
        self.body_file.write_bytes(self.body)

    def warm(self) -> None:
        measure.wrk(self.server.url(self.names[0]), self.body_file, 8, self.bench.plan.warmup,
                    env=self.spread)

    def load(self, seconds: float) -> dict[str, Any]:
        """One c=8 run spread over every version, answers sampled and checked meanwhile."""
        names, counter = self.names, itertools.count()
        with measure.Sampler(lambda rows: (self.server.url(names[next(counter) % len(names)]),
                                           json.dumps({"instances": rows}).encode()),
                             lambda answer: list(answer["predictions"]),
                             [self.row] * len(names), [self.want[name][0] for name in names],
                             f"many/{self.name}"):
            return measure.wrk(self.server.url(names[0]), self.body_file, 8, seconds,
                               env=self.spread)

    def finish(self, load: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None
        _check_every(self.names, self.answers, f"many/{self.name} after the load")
        result = {**self.result, "load_c8": load,
                  "memory_after_load": measure.memory(self.proc.pid)}
        self.bench.log(f"many/{self.name} ({len(self.names)} versions): ready "
                       f"{result['ready_s']:.2f} s, idle PSS "
                       f"{result['memory_idle']['pss_mib']:.0f} MiB, c=8 p50 "
                       f"{load['p50_us'] / 1e3:.2f} ms, {load['rps']:.0f} rps, errors "
                       f"{load['errors']}")
        return result

    def stop(self) -> None:
        if self.proc is not None:
            measure.stop(self.proc)
            self.proc = None


def _check_every(names: list[str], answers: Any, label: str) -> None:
    wrong = [name for name in names if not answers(name)]
    if wrong:
        raise measure.CheckFailed(f"{label}: {len(wrong)} versions answered wrongly, e.g. {wrong[0]}")
