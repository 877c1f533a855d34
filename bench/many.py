"""Many models: mlemu serving N scikit-learn LogisticRegression versions (200 in the full run)
from one bootstrap file, against the same server with one of them.

For each layout: time from launch to ready (/readyz answers 200, which waits for warm-up to load
every bootstrap version in the process answering, and a correct prediction from the last
version), idle PSS 2 s later, one-row c=8 latency with the requests spread over every version in
turn (post.lua with BENCH_PATHS), every version's answer checked in full before and after the
load and sampled during it, and PSS after the load. Layouts:
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
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import measure, models
from bench.harness import Bench
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
    for layout, chosen, env in (("one", {first: dirs[first]}, {}),
                                ("all", dirs, {}),
                                ("capped", dirs, {"MLEMU_MAX_LOADED_VERSIONS": str(n // 2)})):
        out[layout] = _layout(bench, layout, chosen, env, row, want)
    one, full = out["one"]["memory_after_load"], out["all"]["memory_after_load"]
    out["pss_per_extra_version_mib"] = (full["pss_mib"] - one["pss_mib"]) / max(1, n - 1)
    bench.log(f"many models: PSS per extra loaded version "
              f"{out['pss_per_extra_version_mib']:.2f} MiB")
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


def _layout(bench: Bench, layout: str, dirs: dict[str, Path], env: dict[str, str],
            row: list[float], want: dict[str, list[Any]]) -> dict[str, Any]:
    server = _Env(bench.out, env)
    names = list(dirs)
    work = bench.out / "run" / f"many-{layout}"
    work.mkdir(parents=True, exist_ok=True)
    server.workdir = work
    body = json.dumps({"instances": [row]}).encode()

    def answers(name: str) -> bool:
        status, answer = measure.post(server.url(name), body, timeout=10)
        return status == 200 and measure.same(answer["predictions"], want[name])

    def ready() -> bool:
        return measure.get_status(f"http://127.0.0.1:{server.port}/readyz") == 200 \
            and answers(names[-1])

    proc = server.start(dirs, work / "server.log")
    try:
        result: dict[str, Any] = {"ready_s": measure.wait_ready(ready, proc, 600)}
        time.sleep(2)
        result["memory_idle"] = measure.memory(proc.pid)
        _check_every(names, answers, f"many/{layout} before the load")
        paths = work / "paths.txt"
        paths.write_text("".join(f"/v1/projects/bench/models/{name}:predict\n" for name in names))
        body_file = work / "body.json"
        body_file.write_bytes(body)
        spread = {"BENCH_PATHS": str(paths)}
        measure.wrk(server.url(names[0]), body_file, 8, bench.plan.warmup, env=spread)
        counter = itertools.count()
        with measure.Sampler(lambda rows: (server.url(names[next(counter) % len(names)]),
                                           json.dumps({"instances": rows}).encode()),
                             lambda answer: list(answer["predictions"]), [row] * len(names),
                             [want[name][0] for name in names], f"many/{layout}"):
            result["load_c8"] = measure.wrk(server.url(names[0]), body_file, 8,
                                            bench.plan.seconds, env=spread)
        _check_every(names, answers, f"many/{layout} after the load")
        result["memory_after_load"] = measure.memory(proc.pid)
    finally:
        measure.stop(proc)
    load = result["load_c8"]
    bench.log(f"many/{layout} ({len(names)} versions): ready {result['ready_s']:.2f} s, idle PSS "
              f"{result['memory_idle']['pss_mib']:.0f} MiB, c=8 p50 {load['p50_us'] / 1e3:.2f} ms, "
              f"{load['rps']:.0f} rps, errors {load['errors']}")
    return result


def _check_every(names: list[str], answers: Any, label: str) -> None:
    wrong = [name for name in names if not answers(name)]
    if wrong:
        raise measure.CheckFailed(f"{label}: {len(wrong)} versions answered wrongly, e.g. {wrong[0]}")
