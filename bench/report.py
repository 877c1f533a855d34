"""The ratio table, the targets of issue 8, the environment, and bench/RESULTS.md."""

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

from bench.servers import ROOT, VENVS

PEERS = ("mlserver", "kserve")
MODELS = ("logreg", "forest", "xgb", "tf")
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
    peers = {n: _freeze(str(VENVS / n / "bin" / "python")) for n in names if n in PEERS}
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(int(mem) / 1024 / 1024, 1),
        "os": osr.get("PRETTY_NAME", "").strip('"'), "kernel": platform.release(),
        "python": sys.version.split()[0], "wrk": _run(["wrk", "-v"]).splitlines()[0:1],
        "mlemu_commit": _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "mlemu_packages": mlemu, "peer_packages": peers,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def _get(result: dict[str, Any], *path: str) -> float | None:
    value: Any = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, (int, float)) else None


def rows(results: dict[str, Any]) -> list[tuple[str, bool, dict[str, float | None], float | None]]:
    """(figure, higher_is_better, value per server, floor) for every figure of the table."""
    servers = results["servers"]
    out: list[tuple[str, bool, dict[str, float | None], float | None]] = []

    def add(label: str, higher: bool, path: tuple[str, ...], scale: float = 1.0,
            floor: float | None = None) -> None:
        values = {}
        for name, res in servers.items():
            v = _get(res, *path)
            values[name] = v * scale if v is not None else None
        out.append((label, higher, values, floor))

    for model in MODELS:
        for c in (1, 8, 64):
            add(f"{model} c={c} requests/s", True, ("load", model, f"c{c}", "rps"))
            add(f"{model} c={c} p50 ms", False, ("load", model, f"c{c}", "p50_us"), 1e-3)
            add(f"{model} c={c} p99 ms", False, ("load", model, f"c{c}", "p99_us"), 1e-3)
            add(f"{model} c={c} errors", False, ("load", model, f"c{c}", "errors"))
    for model in MODELS[:3]:
        for n in (1000, 10000):
            floor = _get(results, "floor", f"{model}/{n}", "full_s")
            add(f"{model} {n} instances ms", False, ("big", model, str(n), "min_s"), 1e3,
                floor * 1e3 if floor is not None else None)
            model_s = _get(results, "floor", f"{model}/{n}", "model_s")
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
    add("idle PSS, all models MiB", False, ("memory_idle_all_models", "pss_mib"))
    add("PSS after load MiB", False, ("memory_after_load", "pss_mib"))
    add("RSS after load MiB", False, ("memory_after_load", "rss_mib"))
    return out


def _best(values: dict[str, float | None], higher: bool) -> float | None:
    peers = [v for k, v in values.items() if k in PEERS and v is not None]
    if not peers:
        return None
    return max(peers) if higher else min(peers)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v else "0"


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
        best = _best(values, higher)
        mine = values.get("mlemu")
        cells = [label, *(_fmt(values.get(n)) for n in names), _fmt(best),
                 "-" if label.endswith("errors") else _ratio(mine, best), _fmt(floor),
                 _ratio(mine, floor)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + targets(results)


def targets(results: dict[str, Any]) -> str:
    """Issue 8's targets, each with the measured ratio and whether it is met."""
    s = results["servers"]

    def peer_best(path: tuple[str, ...], higher: bool) -> float | None:
        return _best({n: _get(s.get(n, {}), *path) for n in PEERS}, higher)

    def mine(path: tuple[str, ...], server: str = "mlemu") -> float | None:
        return _get(s.get(server, {}), *path)

    checks: list[tuple[str, float | None, float | None, str, float]] = []

    def check(label: str, a: float | None, b: float | None, op: str, bound: float,
              scale: float = 1.0) -> None:
        """One target; `scale` converts both figures to the unit the label names."""
        def scaled(x: float | None) -> float | None:
            return None if x is None else x * scale

        checks.append((label, scaled(a), scaled(b), op, bound))

    rps = ("load", "logreg", "c8", "rps")
    check("LogisticRegression c=8 requests/s vs best peer", mine(rps), peer_best(rps, True), ">=", 1.3)
    rps = ("load", "forest", "c64", "rps")
    check("RandomForest c=64 requests/s vs best peer", mine(rps), peer_best(rps, True), ">=", 5.0)
    p99 = ("load", "forest", "c64", "p99_us")
    check("RandomForest c=64 p99 ms vs best peer's p99", mine(p99), peer_best(p99, False), "<=", 1.0,
          1e-3)
    ab = results.get("ab_forest_c1", {})
    check("RandomForest c=1 p50 ms vs mlemu unbatched (interleaved runs)",
          ab.get("batched_p50_us"), ab.get("unbatched_p50_us"), "<=", 1.10, 1e-3)
    rps = ("load", "xgb", "c8", "rps")
    check("XGBoost c=8 requests/s vs best peer", mine(rps), peer_best(rps, True), ">=", 1.5)
    for model in ("logreg", "forest", "xgb"):
        big = ("big", model, "10000", "min_s")
        check(f"{model} 10,000 instances ms vs in-process floor", mine(big),
              _get(results, "floor", f"{model}/10000", "full_s"), "<=", 1.25, 1e3)
        check(f"{model} 10,000 instances ms vs fastest peer", mine(big), peer_best(big, False), "<",
              1.0, 1e3)
    cold = ("cold_start_s",)
    check("cold start s (one sklearn model) vs best peer", mine(cold), peer_best(cold, False), "<=", 0.5)
    pss = ("idle_one_sklearn_model", "pss_mib")
    check("idle PSS MiB (one sklearn model) vs best peer", mine(pss), peer_best(pss, False), "<=", 0.5)
    lines = ["| target | mlemu | reference | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for label, a, b, op, bound in checks:
        if a is None or b is None or b == 0:
            lines.append(f"| {label} | {_fmt(a)} | {_fmt(b)} | - | {op} {bound} | not measured |")
            continue
        r = a / b
        met = {">=": r >= bound, "<=": r <= bound, "<": r < bound}[op]
        lines.append(f"| {label} | {_fmt(a)} | {_fmt(b)} | {r:.2f}x | {op} {bound} | "
                     f"{'yes' if met else 'NO'} |")
    return "\n".join(lines) + "\n"


def write_results_md(path: Path, results: dict[str, Any], table_text: str, raw: Path) -> None:
    env = results["environment"]
    settings = "\n".join(f"- **{name}**: {res.get('settings', res.get('failed'))}"
                         for name, res in results["servers"].items())
    peers = "\n".join(f"- {name}: " + ", ".join(f"{k}=={v}" for k, v in sorted(pins.items()))
                      for name, pins in env["peer_packages"].items())
    notes = (Path(__file__).parent / "NOTES.md")
    plan = results["plan"]
    target = "bench-quick" if results["quick"] else "bench"
    flag = " --quick" if results["quick"] else ""
    text = f"""# Benchmark results

Generated by `python -m bench{flag}` (what `make {target}` runs after installing the peers)
on {env['date_utc']} UTC in {results['elapsed_s'] / 60:.1f} minutes; raw figures in
`bench/results/{raw.name}` (not committed). Ratios are measured side by side in one run: the
servers run at once on the same machine, model files, request bodies and load generator, and every
load scenario is run on each server in turn (the order rotating), seconds apart.

## Machine and versions

- CPU: {env['cpu']}, {env['cores']} cores; {env['memory_gib']} GiB; {env['os']}, Linux {env['kernel']}
- Python {env['python']}; load generator: {' '.join(env['wrk'])} (Debian), 127.0.0.1 only
- mlemu {env['mlemu_commit']}: """ + ", ".join(f"{k}=={v}" for k, v in env["mlemu_packages"].items()) + f"""
{peers}

## Servers and settings

{settings}

## Method

- Models (bench/models.py, trained at run time): LogisticRegression (30 features), RandomForestClassifier
  (100 trees, depth 8), XGBoost binary:logistic (100 rounds, depth 6), and for mlemu a TensorFlow
  SavedModel (Dense 64 relu, Dense 1 sigmoid). Predictions are labels (scikit-learn `predict`) and
  probabilities (XGBoost, TensorFlow) on every server.
- Load: `wrk -t{{1|2}} -c{{1,8,64}} -d{plan['seconds']:g}s --timeout 10s -s bench/post.lua URL` after a
  {plan['warmup']:g} s unmeasured run, one single-instance body per protocol (AI Platform
  `{{"instances": [...]}}`, V2 `{{"inputs": [...]}}`, KServe V1 `{{"instances": [...]}}`). The Lua script
  checks every answer: status 200 and the same predictions as the thread's first answer, which is
  checked against the in-process prediction; errors counts everything else. After the load, 64
  single-row requests with distinct rows from 16 threads are each checked against their own row's
  prediction.
- Big requests: one request of 1,000 and of 10,000 instances x 30 features, each server on its own
  keep-alive connection, and the in-process floor (orjson decode + `np.asarray` + model + orjson
  encode of the same body, no HTTP) taking turns call by call, the order rotating: one unmeasured
  call each, then {plan['big_repeats']} rounds; the figure is each one's best call (other work on
  this machine only ever adds time, and taking turns spreads it over all of them alike). Every
  answer is checked in full, outside the timing. The servers' figures also include moving the
  body over HTTP, which the floor does not, but mlemu decodes such an all-number body with
  simdjson straight into the array (`wirearray.py`; the "lever 10,000 instances to an array"
  row) where the floor, as the issue defines it, uses orjson and `np.asarray`, so mlemu can
  come in under it. "Model call alone" is the model on a ready array, best of
  {plan['floor_repeats']}.
- RandomForest c=1 with and without batching: both mlemu servers run side by side and take turns
  ({plan['ab_rounds']} alternating wrk runs each), so that drifting load on the machine hits both
  alike; the figure is the median of each one's p50s.
- Cold start: process launch to the first correct prediction with one LogisticRegression model
  (median of {plan['cold_starts']}, one server at a time, the servers taking turns launch by
  launch); idle memory 2 s after each one's first launch. Memory is RSS and PSS summed over the
  server's whole process tree from /proc/PID/smaps_rollup.
- mlemu-unbatched (MLEMU_BATCH_MAX_INSTANCES=0) and mlemu-xgb-allthreads (MLEMU_XGBOOST_NTHREAD=0)
  serve the same models as mlemu with one lever changed: the before/after of that lever.

## Figures

{table_text}
"""
    if notes.exists():
        text += "\n" + notes.read_text()
    path.write_text(text)
