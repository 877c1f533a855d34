"""A thousand versions of mixed frameworks and sizes under a memory cap (part of the many-models
phase), against the same server with one of them.

The layout (bench/notes/thousand.md): N versions (1,000 in the full run), each its own model;
every tenth from the fourth a RandomForest, every tenth from the eighth an XGBoost booster, the
middle one the TensorFlow SavedModel, the rest LogisticRegression. Forests (10-80 trees, depth
4-8) and boosters (10-80 rounds) are trained templates copied into each version's directory.

Layouts: `one` (the first version): its time to ready and idle PSS. `templates` (one version
of each model shape: each forest and booster template, the TensorFlow model, one
LogisticRegression) and `all` (every version, no cap), both up and taking turns, sent the same
sequence of model shapes (`templates` the version of the same shape in each one's place): the
spread c=8 p50 of many versions against few with the same model work (one version per framework
would not: bench/notes/thousand.md). `capped`, alone: every version, MLEMU_MAX_LOADED_MB at half
the estimated total (registry/footprint.py), the count cap off: the set does not fit. Of
`capped`: time to ready (/readyz and a correct answer from the last version, which loads on
demand) against `one`; PSS once the background warm-up settled (estimated loaded bytes unchanged
for 3 s) and after its spread load (every version in turn, the worst case for LRU: shown, not
judged); evictions; models.list p50 over its 1,000 models. Models' PSS per worker = (PSS of
`capped` - PSS of `templates`, 5 s after their loads, each server alone) / workers: what the cap
bounds, without the frameworks' code (and the same of anonymous memory only, shown: it does not
move with what other servers on the machine map). And, in a separate process with each framework
imported first, the first load against the reload after eviction, per framework, in interleaved
pairs (CPU time; bench/reloads.py).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import many, measure, models
from bench.harness import Bench, median_run
from bench.servers import ROOT, framework
from bench.targets import get

CAP_SHARE = 0.5
#: Templates: forests (trees, depth) and boosters (rounds), trained once each.
FORESTS = ((10, 4), (20, 6), (40, 8), (80, 8))
BOOSTERS = (10, 20, 40, 80)


def kind_of(i: int, n: int, with_tf: bool) -> str:
    if with_tf and i == n // 2:
        return "tf"
    return {3: "forest", 7: "xgb"}.get(i % 10, "logreg")


def shape_of(kind: str, source: Path) -> str:
    """A one-row call's model work: its template's, one for all (same-shaped) LogisticRegressions."""
    return kind if kind == "logreg" else str(source)


def _templates(root: Path, with_tf: bool, base: Path) -> dict[str, list[Path]]:
    import joblib
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    x, y = models.training_data()
    out: dict[str, list[Path]] = {"forest": [], "xgb": []}
    for trees, depth in FORESTS:
        d = root / f"forest-{trees}-{depth}"
        if not (d / "model.joblib").exists():
            d.mkdir(parents=True, exist_ok=True)
            forest = RandomForestClassifier(n_estimators=trees, max_depth=depth, random_state=0)
            joblib.dump(forest.fit(x, y), d / "model.joblib")
        out["forest"].append(d)
    for rounds in BOOSTERS:
        d = root / f"xgb-{rounds}"
        if not (d / "model.bst").exists():
            d.mkdir(parents=True, exist_ok=True)
            booster = xgb.train({"objective": "binary:logistic", "max_depth": 6, "nthread": 2},
                                xgb.DMatrix(x, label=y), num_boost_round=rounds)
            booster.save_model(str(d / "model.json"))
            (d / "model.json").rename(d / "model.bst")
        out["xgb"].append(d)
    out["logreg"] = list(many.build(root / "logreg", 40).values())
    if with_tf:
        out["tf"] = [models.build(base, with_tf=True)["tf"]]  # the load phase's, usually built
    return out


def build(root: Path, n: int, base: Path) -> tuple[dict[str, Path], dict[str, str],
                                                  dict[str, Path]]:
    """(name -> version directory, name -> kind, name -> the template it copies); `base` holds
    bench/models.py's models (the TensorFlow one is taken from there)."""
    with_tf = importlib.util.find_spec("tensorflow") is not None
    templates = _templates(root / "templates", with_tf, base)
    dirs, kinds, sources = {}, {}, {}
    for i in range(n):
        name, kind = f"m{i:04d}", kind_of(i, n, with_tf)
        pool = templates[kind]
        source = pool[(i // 10) % len(pool)]
        d = root / "versions" / name
        if not d.exists():
            shutil.copytree(source, d)
        dirs[name], kinds[name], sources[name] = d, kind, source
    return dirs, kinds, sources


def run(bench: Bench) -> dict[str, Any]:
    n = bench.plan.mixed_versions
    dirs, kinds, sources = build(bench.out / "models" / "thousand", n, bench.out / "models")
    row = bench.rows[0]
    refs: dict[Path, list[Any]] = {}
    for source, kind in {s: kinds[k] for k, s in sources.items()}.items():
        refs[source] = (models.tf_reference(source, [row]) if kind == "tf"
                        else models.reference(source, kind)([row]))
    want = {name: refs[sources[name]] for name in dirs}
    from registry import footprint

    total = sum(footprint.estimate(str(d), framework(d)) for d in dirs.values())
    cap_mib = max(1, int(total * CAP_SHARE / 2**20))
    counts = {k: list(kinds.values()).count(k) for k in sorted(set(kinds.values()))}
    out: dict[str, Any] = {"versions": n, "kinds": counts, "cap_mib": cap_mib,
                           "estimated_total_mib": total / 2**20}
    bench.log(f"thousand: {n} versions {counts}, estimated {total / 2**20:.0f} MiB, "
              f"MLEMU_MAX_LOADED_MB={cap_mib}")
    first = next(iter(dirs))
    one = _Settled(bench, "thousand-one", {first: dirs[first]}, {}, row, want)
    try:  # the one-model server's time to ready and idle memory
        one.start()
        out["one"] = dict(one.result)
    finally:
        one.stop()
    shapes = {name: shape_of(kinds[name], sources[name]) for name in dirs}
    one_each = {shape: name for name, shape in reversed(shapes.items())}  # the first of each
    pair = [_Settled(bench, "thousand-templates", {k: dirs[k] for k in one_each.values()}, {},
                     row, want, [one_each[shapes[name]] for name in dirs]),
            _Settled(bench, "thousand-all", dirs, {"MLEMU_MAX_LOADED_VERSIONS": "0"}, row, want)]
    try:
        for layout in pair:
            layout.start()
        for layout in pair:
            layout.warm()
        runs: dict[str, list[dict[str, Any]]] = {layout.name: [] for layout in pair}
        for i in range(bench.plan.ab_rounds):
            for layout in pair[i % 2:] + pair[:i % 2]:
                runs[layout.name].append(layout.load(max(1.0, bench.plan.seconds / 2)))
        out["all"] = pair[1].finish(median_run(runs[pair[1].name]))
        # `templates`' PSS after its load is read alone: the two servers map the same libraries
        # (TensorFlow's above all), and PSS splits a shared page among the processes mapping it,
        # so with `all` still up the baseline the capped server is compared with read low.
        pair[1].stop()
        out["templates"] = pair[0].finish(median_run(runs[pair[0].name]))
    finally:
        for layout in pair:
            layout.stop()
    # capped: the set does not fit; alone. Its spread, every version in turn, is the worst case
    # for least-recently-used (every request reloads), shown, not judged.
    env = {"MLEMU_MAX_LOADED_MB": str(cap_mib), "MLEMU_MAX_LOADED_VERSIONS": "0"}
    capped = _Settled(bench, "thousand-capped", dirs, env, row, want)
    try:
        capped.start()
        capped.result["loaded_mib_idle"] = capped.metric("mlemu_models_loaded_bytes") / 2**20
        capped.warm()
        out["capped"] = capped.finish(capped.load(bench.plan.seconds))
        out["capped"]["loaded_mib"] = capped.metric("mlemu_models_loaded_bytes") / 2**20
        out["capped"]["evictions"] = capped.metric("mlemu_model_evictions_total")
        out["models_list_p50_ms"] = _list_p50(capped.server.port, 100, min(n, 20))
    finally:
        capped.stop()
    workers = _workers()
    out["workers"] = workers
    out["models_pss_per_worker_mib"] = (out["capped"]["memory_settled"]["pss_mib"]
                                        - out["templates"]["memory_settled"]["pss_mib"]) / workers
    out["models_anon_pss_per_worker_mib"] = (
        out["capped"]["memory_settled"]["pss_anon_mib"]
        - out["templates"]["memory_settled"]["pss_anon_mib"]) / workers  # shown: heap only
    out["reload"] = _reloads(dirs, kinds, sources, cap_mib)
    bench.log(f"thousand: models' PSS per worker {out['models_pss_per_worker_mib']:.0f} MiB "
              f"(cap {cap_mib}), models.list p50 {out['models_list_p50_ms']:.2f} ms, "
              f"reload/first {json.dumps(out['reload'])}")
    return out


def report_rows(t: dict[str, Any]) -> list[tuple[str, bool, dict[str, float], float | None]]:
    """This layout's rows of the figures table (bench/report.py), from `run`'s result."""
    rows = []
    n = t.get("versions")
    for layout, title in (("one", "1 version"), ("all", f"{n} mixed versions, all loaded"),
                          ("capped", f"{n} mixed versions, MLEMU_MAX_LOADED_MB={t.get('cap_mib')}"),
                          ("templates", "one version per model shape, the same mix")):
        for label, path, scale in (("ready s", ("ready_s",), 1.0),
                                   ("idle PSS MiB (warm-up settled)", ("memory_idle", "pss_mib"), 1.0),
                                   ("c=8 spread p50 ms", ("load_c8", "p50_us"), 1e-3),
                                   ("c=8 spread requests/s", ("load_c8", "rps"), 1.0),
                                   ("PSS after load MiB", ("memory_after_load", "pss_mib"), 1.0),
                                   ("PSS 5 s after load MiB", ("memory_settled", "pss_mib"), 1.0)):
            v = get(t, layout, *path)
            if v is not None:
                rows.append((f"thousand ({title}) {label}", "requests/s" in label,
                             {"mlemu": v * scale}, None))
    for kind in ("logreg", "forest", "xgb", "tf"):
        for key in ("first", "reload"):
            v, spread = get(t, "reload", kind, f"{key}_s"), get(t, "reload", kind, f"{key}_iqr_s")
            what = "first load" if key == "first" else "reload after eviction"
            if v is not None:
                rows.append((f"thousand: {kind} {what} CPU ms (median)", False,
                             {"mlemu": v * 1e3}, None))
            if spread is not None:  # its samples' third quartile - first (bench/reloads.py)
                rows.append((f"thousand: {kind} {what} CPU ms, interquartile range", False,
                             {"mlemu": spread * 1e3}, None))
    for label, value in (("models' PSS per worker MiB", t.get("models_pss_per_worker_mib")),
                         ("models' anonymous PSS per worker MiB (shown)",
                          t.get("models_anon_pss_per_worker_mib")),
                         ("models.list p50 ms", t.get("models_list_p50_ms"))):
        if value is not None:
            rows.append((f"thousand: {label}", False, {"mlemu": value}, None))
    return rows


def _workers() -> int:
    """The gunicorn workers mlemu's defaults choose on this machine (each loads its own copies)."""
    from core.settings import Settings

    return Settings.from_env({}).worker_layout()[0]


def _list_p50(port: int, count: int, page: int) -> float:
    import http.client

    times = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        for _ in range(count):
            start = time.perf_counter()
            conn.request("GET", "/v1/projects/bench/models")
            response = conn.getresponse()
            body = response.read()
            times.append(time.perf_counter() - start)
            if response.status != 200 or len(json.loads(body)["models"]) != page:
                raise measure.CheckFailed(f"models.list answered {response.status}")
    finally:
        conn.close()
    return statistics.median(times) * 1e3


class _Settled(many._Layout):
    """A layout whose idle PSS is taken once the background warm-up has settled (the estimated
    loaded bytes unchanged for 3 s), not 2 s after ready; its spread load goes over `sequence`
    (version names, repeats allowed; default: every version once) in turn."""

    def __init__(self, bench: Bench, name: str, dirs: dict[str, Path], env: dict[str, str],
                 row: list[float], want: dict[str, list[Any]],
                 sequence: list[str] | None = None) -> None:
        super().__init__(bench, name, dirs, env, row, want)
        self.sequence = sequence or self.names

    def start(self) -> None:
        def ready() -> bool:
            return measure.get_status(f"http://127.0.0.1:{self.server.port}/readyz") == 200 \
                and self.answers(self.names[-1])

        self.proc = self.server.start(self.dirs, self.work / "server.log")
        self.result["ready_s"] = measure.wait_ready(ready, self.proc, 600)
        started, last, same = time.perf_counter(), -1.0, 0
        while same < 3 and time.perf_counter() - started < 600:
            time.sleep(1)
            now = self.metric("mlemu_models_loaded_bytes")
            same = same + 1 if now == last else 0
            last = now
        self.result["settle_s"] = time.perf_counter() - started
        self.result["memory_idle"] = measure.memory(self.proc.pid)
        many._check_every(self.names, self.answers, f"many/{self.name} before the load")
        (self.work / "paths.txt").write_text(
            "".join(f"/v1/projects/bench/models/{name}:predict\n" for name in self.sequence))
        self.body_file.write_bytes(self.body)

    def finish(self, load: dict[str, Any]) -> dict[str, Any]:
        """As many's, then PSS again 5 s later: memory the caps freed during the load goes back
        to the system at the server's next tick (every 2 s), which the figure right after the
        load has not seen yet."""
        result = super().finish(load)
        time.sleep(5)
        assert self.proc is not None
        result["memory_settled"] = measure.memory(self.proc.pid)
        return result

    def metric(self, name: str) -> float:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.server.port}/metrics",
                                    timeout=60) as r:
            text = r.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith((name + "{", name + " ")))


def _reloads(dirs: dict[str, Path], kinds: dict[str, str], sources: dict[str, Path],
             cap_mib: int) -> dict[str, Any]:
    """First load and reload after eviction, per framework, in a fresh process (CPU time;
    bench/reloads.py times copies of the templates, in pairs)."""
    spec = {"dirs": {n: str(d) for n, d in dirs.items()}, "kinds": kinds,
            "sources": {n: str(d) for n, d in sources.items()}, "cap_mib": cap_mib}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    done = subprocess.run([sys.executable, "-m", "bench.reloads", f.name], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800, check=True)
    Path(f.name).unlink()
    return json.loads(done.stdout.strip().splitlines()[-1])
