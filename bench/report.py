"""The figures table, the environment, and bench/RESULTS.md (the targets: bench/targets.py)."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import targets, thousand
from bench.servers import PEERS, ROOT, VENVS
from bench.targets import best_peer, fmt, get

MODELS = ("logreg", "forest", "xgb", "tf", "tf1")
KEY_PACKAGES = ("flask", "gunicorn", "orjson", "pysimdjson", "numpy", "scikit-learn", "xgboost-cpu",
                "xgboost", "tensorflow-cpu", "mlserver", "mlserver-sklearn", "mlserver-xgboost", "kserve",
                "fastapi", "uvicorn", "pydantic")


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, check=False, capture_output=True, text=True,
                              timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _freeze(python: str) -> dict[str, str]:
    pins = {}
    for line in _run([python, "-m", "pip", "freeze"]).splitlines():
        name, _, version = line.partition("==")
        if name.lower() in KEY_PACKAGES:
            pins[name.lower()] = version
    return pins


def environment(names: list[str]) -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    osr = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines()
               if "=" in line)
    mlemu = {}
    for name in KEY_PACKAGES[:9]:
        with contextlib.suppress(metadata.PackageNotFoundError):
            mlemu[name] = metadata.version(name)
    # flask runs in mlemu's environment (its packages are listed with mlemu's).
    peers = {n: _freeze(str(VENVS / n / "bin" / "python")) for n in names
             if n in PEERS and (VENVS / n).is_dir()}
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(int(mem) / 1024 / 1024, 1),
        "os": osr.get("PRETTY_NAME", "").strip('"'), "kernel": platform.release(),
        "python": sys.version.split()[0], "wrk": _run(["wrk", "-v"]).splitlines()[0:1],
        "h2load": _run(["h2load", "--version"]).splitlines()[0:1],
        "mlemu_commit": _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "mlemu_packages": mlemu, "peer_packages": peers,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


#: (figure, higher_is_better, value per server, floor)
Row = tuple[str, bool, dict[str, float | None], float | None]


def rows(results: dict[str, Any]) -> list[Row]:
    """(figure, higher_is_better, value per server, floor) for every figure of the table."""
    servers = results["servers"]
    out: list[Row] = []

    def add(label: str, higher: bool, path: tuple[str, ...], scale: float = 1.0,
            floor: float | None = None) -> None:
        values = {}
        for name, res in servers.items():
            v = get(res, *path)
            values[name] = v * scale if v is not None else None
        out.append((label, higher, values, floor))

    for model in MODELS:
        for c in (1, 8, 64):
            add(f"{model} c={c} requests/s", True, ("load", model, f"c{c}", "rps"))
            add(f"{model} c={c} p50 ms", False, ("load", model, f"c{c}", "p50_us"), 1e-3)
            add(f"{model} c={c} p99 ms", False, ("load", model, f"c{c}", "p99_us"), 1e-3)
            add(f"{model} c={c} errors", False, ("load", model, f"c{c}", "errors"))
    for model in MODELS:
        for n in (1000, 10000):
            floor = get(results, "floor", f"{model}/{n}", "full_s")
            add(f"{model} {n} instances ms", False, ("big", model, str(n), "min_s"), 1e3,
                floor * 1e3 if floor is not None else None)
            model_s = get(results, "floor", f"{model}/{n}", "model_s")
            if model_s is not None:
                out.append((f"{model} {n} instances: model call alone ms", False, {},
                            model_s * 1e3))
    levers = results.get("levers", {})
    for label, before, after, scale in (
            ("lever JSON decode 10,000 instances ms (stdlib -> orjson)", "json_stdlib_decode_s",
             "json_wirejson_decode_s", 1e3),
            ("lever 10,000 instances to an array ms (orjson + np.asarray -> wirearray)",
             "array_asarray_s", "array_wirearray_s", 1e3),
            ("lever JSON encode 10,000 predictions ms (stdlib -> orjson)", "json_stdlib_encode_s",
             "json_wirejson_encode_s", 1e3),
            ("lever serving-version lookup us (store read -> cached)", "lookup_store_read_s",
             "lookup_cached_s", 1e6)):
        if before in levers:
            out.append((label, False, {"mlemu": levers[after] * scale}, levers[before] * scale))
    add("cold start, one sklearn model s", False, ("cold_start_s",))
    add("idle PSS, one sklearn model MiB", False, ("idle_one_sklearn_model", "pss_mib"))
    add("idle RSS, one sklearn model MiB", False, ("idle_one_sklearn_model", "rss_mib"))
    for model in MODELS:
        add(f"{model}: PSS after its load MiB", False, ("memory_after_load", model, "pss_mib"))
    add("gRPC V2 ModelInfer logreg c=8 requests/s", True, ("grpc", "rps"))
    add("gRPC V2 ModelInfer logreg c=8 p50 ms", False, ("grpc", "p50_us"), 1e-3)
    add("gRPC V2 ModelInfer logreg c=8 p99 ms", False, ("grpc", "p99_us"), 1e-3)
    add("gRPC V2 ModelInfer logreg c=8 errors", False, ("grpc", "errors"))
    _vertex_and_demo(results, out)
    many = results.get("many", {})
    for layout in ("one", "all", "capped"):
        for label, path, scale in (("ready s", ("ready_s",), 1.0),
                                   ("idle PSS MiB", ("memory_idle", "pss_mib"), 1.0),
                                   ("c=8 spread p50 ms", ("load_c8", "p50_us"), 1e-3),
                                   ("c=8 spread p99 ms", ("load_c8", "p99_us"), 1e-3),
                                   ("c=8 spread requests/s", ("load_c8", "rps"), 1.0),
                                   ("PSS after load MiB", ("memory_after_load", "pss_mib"), 1.0)):
            v = get(many, layout, *path)
            if v is not None:
                out.append((f"many models ({layout}: {_layout(many, layout)}) {label}",
                            "requests/s" in label, {"mlemu": v * scale}, None))
    extra = many.get("pss_per_extra_version_mib")
    if extra is not None:
        out.append(("many models: PSS per extra loaded version MiB", False, {"mlemu": extra}, None))
    out += thousand.report_rows(many.get("thousand", {}))
    return out


def _vertex_and_demo(results: dict[str, Any], out: list[Row]) -> None:
    """The rows of the vertex phase (both routes of one mlemu server) and the demo phase."""
    vertex = results.get("ab_vertex", {})
    for route, title in (("ml-v1", "ml v1 :predict"), ("vertex", "Vertex AI endpoints.predict")):
        for key, unit, scale in (("rps", "requests/s", 1.0), ("p50_us", "p50 ms", 1e-3),
                                 ("p99_us", "p99 ms", 1e-3), ("errors", "errors", 1.0),
                                 ("cpu_us_per_request", "server CPU ms per request", 1e-3)):
            v = get(vertex, route, key)
            if v is not None:
                out.append((f"{title} logreg c=8 {unit} (one server, routes taking turns)",
                            key == "rps", {"mlemu": v * scale}, None))
    demo = results.get("demo", {})
    for label, path in (("idle PSS MiB", ("idle", "pss_mib")),
                        ("idle RSS MiB", ("idle", "rss_mib")),
                        ("processes", ("idle", "processes")),
                        ("PSS after one request per version MiB", ("after_requests", "pss_mib"))):
        v = get(demo, *path)
        if v is not None:
            out.append((f"demo (`make serve`) {label}", False, {"mlemu": v}, None))


def _layout(many: dict[str, Any], layout: str) -> str:
    n = many.get("versions", 0)
    return {"one": "1 version", "all": f"{n} versions",
            "capped": f"{n} versions, MLEMU_MAX_LOADED_VERSIONS={n // 2}"}[layout]


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def table(results: dict[str, Any]) -> str:
    names = [n for n in results["servers"] if "failed" not in results["servers"][n]]
    head = ["figure", *names, "best peer", "mlemu / best peer", "floor", "mlemu / floor"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, higher, values, floor in rows(results):
        if not any(values.get(n) is not None for n in names) and floor is None:
            continue
        best = best_peer(values, higher)
        mine = values.get("mlemu")
        cells = [label, *(fmt(values.get(n)) for n in names), fmt(best),
                 "-" if label.endswith("errors") else _ratio(mine, best), fmt(floor),
                 _ratio(mine, floor)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + targets.table(results)


#: What RESULTS.md says of the notes (bench/NOTES.md and its pages).
NOTES_POINTER = """## Notes

The method's reasons and every earlier measurement are in bench/NOTES.md (an index of
bench/notes/, one page per topic).
"""


def write_results_md(path: Path, results: dict[str, Any], table_text: str, raw: Path) -> None:
    env = results["environment"]
    settings = "\n".join(f"- **{name}**: {res.get('settings', res.get('failed'))}"
                         for name, res in results["servers"].items())
    peers = "\n".join(f"- {name}: " + ", ".join(f"{k}=={v}" for k, v in sorted(pins.items()))
                      for name, pins in env["peer_packages"].items())
    plan = results["plan"]
    target = "bench-quick" if results["quick"] else "bench"
    flag = " --quick" if results["quick"] else ""
    command = results.get("command", f"python -m bench{flag}")
    reruns = "".join(
        f"\nPhases {', '.join(r['phases'])} were re-run on {r['date_utc']} UTC at mlemu "
        f"{r['mlemu_commit']} in {r['elapsed_s'] / 60:.1f} minutes (`{r['command']}`); their "
        "figures below are from that run.\n" for r in results.get("reruns", []))
    text = f"""# Benchmark results

Generated by `python -m bench{flag}` (what `make {target}` runs after installing the peers)
on {env['date_utc']} UTC in {results['elapsed_s'] / 60:.1f} minutes; raw figures in
`bench/results/{raw.name}` (not committed). One server is under load at a time, each started with
only the model under test; the servers take turns in a rotating order, {plan['rounds']} round(s),
and each load figure is the median over the rounds.

This run: `{command}`.
{reruns}
## Machine and versions

- CPU: {env['cpu']}, {env['cores']} cores; {env['memory_gib']} GiB; {env['os']}, Linux {env['kernel']}
- Python {env['python']}; load generators: {' '.join(env['wrk'])} (Debian) and """ + \
        f"""{' '.join(env.get('h2load', []))} (Debian nghttp2-client), 127.0.0.1 only
- mlemu {env['mlemu_commit']}: """ + ", ".join(f"{k}=={v}" for k, v in env["mlemu_packages"].items()) + f"""
{peers}

## Servers and settings

{settings}

## Method (bench/NOTES.md, "Fair peers", says why)

- Models (bench/models.py, trained at run time): LogisticRegression (30 features),
  RandomForestClassifier (100 trees, depth 8), XGBoost binary:logistic (100 rounds, depth 6), a
  TensorFlow SavedModel (Dense 64 relu, Dense 1 sigmoid; `tf`) and the same network as a TF1-era
  export (v1 SavedModelBuilder, placeholder [?, 30]; `tf1`). Predictions are labels
  (scikit-learn `predict`) and probabilities (XGBoost, TensorFlow) on every server.
- Load: per server and model, `wrk -t{{1|2}} -c{{1,8,64}} -d{plan['seconds']:g}s --timeout 10s -s
  bench/post.lua URL` after a {plan['warmup']:g} s unmeasured run, one single-instance body per
  protocol (AI Platform and KServe V1 `{{"instances": [...]}}`, V2 `{{"inputs": [...]}}`). wrk counts
  statuses only (no Lua per response); meanwhile a sampler posts one distinct row every 50 ms on
  its own connection and checks its answer in full; before the load the first answer is checked,
  and after it 64 distinct rows from 16 threads are each checked against their own prediction.
- gRPC: V2 `ModelInfer`, one FP64 row [1, 30] of LogisticRegression, `h2load -c8 -m1 -t1
  -D{plan['seconds']:g} --warm-up-time={plan['warmup']:g}` replaying one prepared gRPC frame;
  latency percentiles from h2load's per-request log; every answer of 64 distinct rows checked
  with grpcio before and after, and sampled during the load.
- Big requests: 1,000 and 10,000 instances x 30 features, every server serving the model on its
  own keep-alive connection and the in-process floor (orjson decode + `np.asarray` + model or
  `serving_default` signature + orjson encode, no HTTP) taking turns call by call, the order
  rotating: one unmeasured call each, then {plan['big_repeats']} rounds; the figure is each one's
  best call. Only one request is in flight at a time. Every answer is checked in full, outside
  the timing. mlemu decodes all-number bodies with simdjson straight into the array
  (`wirearray.py`) where the floor uses orjson and `np.asarray`, so mlemu can come in under it.
  "Model call alone" is the model on a ready array, best of {plan['floor_repeats']}.
- Many models: mlemu with {results.get('many', {}).get('versions', '-')} LogisticRegression
  versions in one bootstrap file against one version: launch to ready, idle PSS, c=8 one-row
  latency with requests spread over every version in turn (the one- and the all-version server
  up side by side, taking turns: {plan['ab_rounds']} runs each, medians), and the same with
  MLEMU_MAX_LOADED_VERSIONS at half the versions, alone (bench/many.py). Then
  {results.get('many', {}).get('thousand', {}).get('versions', '-')} versions of mixed frameworks
  (LogisticRegression, RandomForest, XGBoost, one TensorFlow) with MLEMU_MAX_LOADED_MB at half
  their estimated memory against one version: ready, PSS, spread p50 (against one version per
  model shape, sent the same sequence of shapes), models.list p50, and the first load against
  the reload of an evicted version per framework (bench/thousand.py).
- RandomForest c=1 with and without batching: both mlemu servers up, taking turns
  ({plan['ab_rounds']} alternating runs each; at c=1 the idle one takes no CPU); median p50s.
- LogisticRegression with metrics on and off (c=1, 8, 64): mlemu and mlemu-nometrics up side by
  side, taking turns the same way (a 5 % difference is less than this machine's drift between
  the load phase's runs minutes apart); median requests/s.
- Vertex AI: one mlemu server serving LogisticRegression as an ml v1 version and, uploaded and
  deployed through the REST API, on a Vertex AI endpoint; one-row c=8 wrk runs on
  `versions/v1:predict` and `endpoints/E:predict` taking turns ({plan['ab_rounds']} each),
  answers checked as in the load phase; medians (bench/vertex.py).
- gunicorn worker: per optimization, mlemu and mlemu with it off (MLEMU_WORKER_OFF) up side by side,
  LogisticRegression c=1 and c=8 runs taking turns; an A/A control (two default servers) gives the
  method's noise, which an optimization must beat to pay (bench/worker_ab.py).
- Demo: what `make serve` starts (demo/bootstrap.yaml, its settings, free ports), PSS summed over
  the process tree once ready and settled, and after one request per demo version (bench/demo.py).
- c=8 p99, every model: mlemu and the peer with the lowest c=8 p99 in the load phase up side by
  side, taking turns the same way; each one's median p99 over the runs is what the p99 targets
  judge (a p99 is the slowest hundredth of a run: a spell of other work on this shared machine
  moves it far more than a median, and the load phase's rounds are minutes apart).
- Cold start: process launch to the first correct prediction with one LogisticRegression model
  (median of {plan['cold_starts']}, the servers taking turns launch by launch); idle memory 2 s
  after each one's first launch. Memory is RSS and PSS summed over the server's process tree
  from /proc/PID/smaps_rollup.
- mlemu is measured at its defaults. mlemu-threads8 (MLEMU_THREADS=8, the layout before issue
  21), mlemu-unbatched (MLEMU_BATCH_MAX_INSTANCES=0), mlemu-xgb-allthreads
  (MLEMU_XGBOOST_NTHREAD=0) and mlemu-nometrics (MLEMU_METRICS=false) change one setting each:
  levers, never the figure a target is judged on.

## Figures

{table_text}
"""
    # The notes are long and change between runs: RESULTS.md points at them rather than copying them.
    text += "\n" + NOTES_POINTER
    path.write_text(text)
