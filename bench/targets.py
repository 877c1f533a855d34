"""The targets (issues 8, 21 and 36, and Vertex AI's), each with the measured figures, their
ratio and whether it is met, and the small helpers the figures table shares (bench/report.py)."""

from __future__ import annotations

import math
from typing import Any

from bench.servers import MODEL_SERVERS, PEERS
from bench.worker_ab import CONCURRENCY, CONTROL, PAIRS


def get(result: dict[str, Any], *path: str) -> float | None:
    value: Any = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, (int, float)) else None


def best_peer(values: dict[str, float | None], higher: bool,
              among: tuple[str, ...] = PEERS) -> float | None:
    peers = [v for k, v in values.items() if k in among and v is not None]
    if not peers:
        return None
    return max(peers) if higher else min(peers)


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v else "0"


Check = tuple[str, float | None, float | None, str, float]
#: What `make serve` on the demo held before the scale issue (36) asked for one copy of each model
#: per process: two gunicorn workers and two gRPC processes, each with every model loaded.
DEMO_PSS_BEFORE_MIB = 1277.0


def checks(results: dict[str, Any]) -> list[Check]:
    """(label, mlemu's figure, reference, op, bound); a reference of 1.0 makes the bound absolute."""
    s = results["servers"]
    out: list[Check] = []

    def peers(path: tuple[str, ...], higher: bool, among: tuple[str, ...] = PEERS) -> float | None:
        return best_peer({n: get(s.get(n, {}), *path) for n in among}, higher, among)

    def mine(path: tuple[str, ...]) -> float | None:
        return get(s.get("mlemu", {}), *path)

    check = _adder(out)
    rps = ("load", "logreg", "c8", "rps")
    check("LogisticRegression c=8 requests/s vs best peer", mine(rps), peers(rps, True), ">=", 1.5)
    tail = results.get("ab_tail", {})
    for model, title in (("logreg", "LogisticRegression"), ("forest", "RandomForest"),
                         ("xgb", "XGBoost"), ("tf", "TensorFlow (tf)"), ("tf1", "TensorFlow (tf1)")):
        if model in tail:  # the interleaved A/B (bench/load.py ab_tail); else the load phase's
            check(f"{title} c=8 p99 ms vs best peer's p99 ({tail[model]['peer']}, interleaved "
                  "runs)", get(tail, model, "mlemu_p99_us"), get(tail, model, "peer_p99_us"),
                  "<=", 1.0, 1e-3)
            continue
        p99 = ("load", model, "c8", "p99_us")
        check(f"{title} c=8 p99 ms vs best peer's p99", mine(p99), peers(p99, False), "<=", 1.0,
              1e-3)
    ab = results.get("ab_metrics", {})
    for c in ("c1", "c8", "c64"):  # issue 18: metrics cost no throughput (within noise: 0.95)
        if c in ab:  # the interleaved A/B (bench/load.py ab_metrics); else the load phase's runs
            check(f"LogisticRegression {c.replace('c', 'c=')} requests/s, metrics on vs off "
                  "(interleaved runs)", get(ab, c, "on_rps"), get(ab, c, "off_rps"), ">=", 0.95)
            continue
        rps = ("load", "logreg", c, "rps")
        check(f"LogisticRegression {c.replace('c', 'c=')} requests/s, metrics on vs off",
              mine(rps), get(s.get("mlemu-nometrics", {}), *rps), ">=", 0.95)
    rps = ("load", "forest", "c64", "rps")
    check("RandomForest c=64 requests/s vs best peer", mine(rps), peers(rps, True), ">=", 5.0)
    p99 = ("load", "forest", "c64", "p99_us")
    check("RandomForest c=64 p99 ms vs best peer's p99", mine(p99), peers(p99, False), "<=", 1.0,
          1e-3)
    ab = results.get("ab_forest_c1", {})
    check("RandomForest c=1 p50 ms vs mlemu unbatched (interleaved runs)",
          ab.get("batched_p50_us"), ab.get("unbatched_p50_us"), "<=", 1.10, 1e-3)
    rps = ("load", "xgb", "c8", "rps")
    check("XGBoost c=8 requests/s vs best peer", mine(rps), peers(rps, True), ">=", 1.5)
    for model in ("logreg", "forest", "xgb", "tf", "tf1"):
        big = ("big", model, "10000", "min_s")
        bound = 1.1 if model.startswith("tf") else 1.0
        check(f"{model} 10,000 instances ms vs in-process floor", mine(big),
              get(results, "floor", f"{model}/10000", "full_s"), "<=", bound, 1e3)
        check(f"{model} 10,000 instances ms vs fastest peer", mine(big), peers(big, False), "<",
              1.0, 1e3)
    for model in ("tf", "tf1"):
        rps = ("load", model, "c8", "rps")
        check(f"TensorFlow ({model}) c=8 requests/s vs naive Flask + TensorFlow", mine(rps),
              get(s.get("flask", {}), *rps), ">=", 2.0)
    rps = ("grpc", "rps")
    check("gRPC V2 ModelInfer c=8 requests/s vs best peer's gRPC", mine(rps),
          peers(rps, True, MODEL_SERVERS), ">=", 1.5)
    many = results.get("many", {})  # time to ready and spread p50: scale_checks
    check("PSS per extra loaded LogisticRegression version MiB (absolute)",
          many.get("pss_per_extra_version_mib"), 1.0 if many else None, "<=", 2.0)
    _thousand(many.get("thousand", {}), check)
    vertex = results.get("ab_vertex", {})  # bench/vertex.py: one server, both routes in turns
    check("Vertex AI endpoints.predict c=8 requests/s vs ml v1 :predict, same model "
          "(interleaved runs)", get(vertex, "vertex", "rps"), get(vertex, "ml-v1", "rps"), ">=",
          0.90)
    for p, what in (("p50_us", "p50 ms"), ("p99_us", "p99 ms"),
                    ("cpu_us_per_request", "server CPU ms per request")):
        check(f"Vertex AI endpoints.predict c=8 {what} vs ml v1 :predict (interleaved runs)",
              get(vertex, "vertex", p), get(vertex, "ml-v1", p), "info", 1.0, 1e-3)
    out.extend(worker_checks(results))
    cold = ("cold_start_s",)
    check("cold start s (one sklearn model) vs best model server", mine(cold),
          peers(cold, False, MODEL_SERVERS), "<=", 0.5)
    pss = ("idle_one_sklearn_model", "pss_mib")
    check("idle PSS MiB (one sklearn model) vs best model server", mine(pss),
          peers(pss, False, MODEL_SERVERS), "<=", 0.5)
    out.extend(scale_checks(results))
    return out


def scale_checks(results: dict[str, Any]) -> list[Check]:
    """The rows of the scale issue (36) measured by the batch, many and demo phases, and the
    issue 19 rows beside them; a row whose figures a phase did not write says `not measured`.

    Keys read (the phases write them): batch (bench/batch.py) `w1_rate`, `w2_rate`,
    `floor_rate`, ...; many (bench/many.py) `one`/`all` `ready_s` and `load_c8.p50_us`,
    `cap_mib` with `all.memory_after_load.pss_mib`, `reload.first_s` and `reload.reload_s`,
    `list_p50_us`; demo (bench/demo.py) `idle.pss_mib`, `after_requests.pss_mib`."""
    out: list[Check] = []
    batch = results.get("batch", {})  # issues 19 and 36: batch prediction jobs (bench/batch.py)
    check = _adder(out)
    check("batch job, 1 worker, instances/s vs in-process floor (a fresh process)",
          batch.get("w1_rate"), batch.get("floor_rate"), ">=", 0.8)
    check("batch job, 1 worker vs the floor run with its framework already imported",
          batch.get("w1_rate"), batch.get("floor_warm_rate"), "info", 0.7)
    check("batch job, 2 workers, instances/s vs 1 worker (wall clock)", batch.get("w2_rate"),
          batch.get("w1_rate"), ">=", 1.6)
    check("batch job, 2 workers vs 1 worker on the CPU critical path (a free core each)",
          batch.get("w2_path_rate"), batch.get("w1_path_rate"), ">=", 1.6)
    check("batch job, 2 workers vs 1 worker, wall less the CPU run-queue wait (free cores)",
          batch.get("w2_free_rate"), batch.get("w1_free_rate"), "info", 1.6)
    many = results.get("many", {})
    n = many.get("versions", 1000)
    check(f"{n} versions: time to ready s vs one model", get(many, "all", "ready_s"),
          get(many, "one", "ready_s"), "<=", 3.0)
    check(f"{n} versions: PSS after load MiB vs the memory cap", get(
        many, "all", "memory_after_load", "pss_mib"), many.get("cap_mib"), "<=", 1.0)
    check(f"{n} versions: reload of an evicted version s vs its first load",
          get(many, "reload", "reload_s"), get(many, "reload", "first_s"), "<=", 1.10)
    check(f"{n} versions: spread c=8 p50 ms vs one model", get(many, "all", "load_c8", "p50_us"),
          get(many, "one", "load_c8", "p50_us"), "<=", 1.2, 1e-3)
    list_p50 = get(many, "list_p50_us")
    check(f"{n} versions: models.list p50 ms (absolute)",
          None if list_p50 is None else list_p50 * 1e-3, None if list_p50 is None else 1.0, "<",
          20.0)
    demo = results.get("demo", {})  # bench/demo.py: what `make serve` starts
    before = DEMO_PSS_BEFORE_MIB if demo else None
    check("demo (`make serve`) idle PSS MiB vs its 1,277 MiB before one copy per process",
          get(demo, "idle", "pss_mib"), before, "<=", 0.6)
    check("demo PSS MiB after one request per version vs the same 1,277 MiB",
          get(demo, "after_requests", "pss_mib"), before, "info", 0.6)
    return out


def worker_checks(results: dict[str, Any]) -> list[Check]:
    """Each gunicorn-worker optimization on against off (bench/worker_ab.py): it pays when its
    requests/s ratio beats the A/A control's at that concurrency, either way (two identical
    servers, measured the same way: what the method shows for no difference); without the
    control the rows are shown, not judged. Server CPU per request at c=8 beside them."""
    pairs = results.get("ab_worker", {}).get("pairs", {})
    out: list[Check] = []
    check = _adder(out)
    for c in CONCURRENCY:
        control = pairs.get(CONTROL, {}).get(f"c{c}", {})
        aa_on, aa_off = control.get("on_rps"), control.get("off_rps")
        spread = max(aa_on / aa_off, aa_off / aa_on) if aa_on and aa_off else None
        for name in PAIRS:
            f = pairs.get(name, {}).get(f"c{c}", {})
            turns = f" in {f['on_ahead']}/{f['runs']} turns" if f else ""
            if name == CONTROL:
                check(f"gunicorn worker: A/A control, default vs default, c={c} requests/s "
                      f"(server A ahead{turns})", f.get("on_rps"), f.get("off_rps"), "info", 1.0)
            else:  # goal: the control's ratio either way, rounded up
                check(f"gunicorn worker: {name} on vs off, c={c} requests/s (on ahead{turns}; "
                      "pays: beyond the A/A control)", f.get("on_rps"), f.get("off_rps"),
                      ">=" if spread else "info",
                      math.ceil(spread * 100 - 1e-9) / 100 if spread else 1.0)
    for name in PAIRS[1:]:
        f = pairs.get(name, {}).get("c8", {})
        check(f"gunicorn worker: {name} on vs off, c=8 server CPU us per request",
              f.get("on_cpu_us"), f.get("off_cpu_us"), "info", 1.0)
    return out


def _adder(out: list[Check]) -> Any:
    """`check(label, a, b, op, bound, scale=1.0)` appending to `out`."""
    def check(label: str, a: float | None, b: float | None, op: str, bound: float,
              scale: float = 1.0) -> None:
        out.append((label, None if a is None else a * scale, None if b is None else b * scale,
                    op, bound))
    return check


def table(results: dict[str, Any]) -> str:
    lines = ["| target | mlemu | reference | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for label, a, b, op, bound in checks(results):
        if a is None or b is None or b == 0:
            lines.append(f"| {label} | {fmt(a)} | {fmt(b)} | - | {op} {bound} | not measured |")
            continue
        r = a / b
        if op == "info":  # shown beside a target's row, not a target itself
            lines.append(f"| {label} | {fmt(a)} | {fmt(b)} | {r:.2f}x | - | (not a target) |")
            continue
        met = {">=": r >= bound, "<=": r <= bound, "<": r < bound}[op]
        lines.append(f"| {label} | {fmt(a)} | {fmt(b)} | {r:.2f}x | {op} {bound} | "
                     f"{'yes' if met else 'NO'} |")
    return "\n".join(lines) + "\n"


def _thousand(t: dict[str, Any], check: Any) -> None:
    """The 1,000 mixed versions under a memory cap (bench/thousand.py)."""
    n = t.get("versions", 1000)
    absolute = 1.0 if t else None
    check(f"{n} mixed models under a memory cap: time to ready s vs one model",
          get(t, "capped", "ready_s"), get(t, "one", "ready_s"), "<=", 3.0)
    check(f"{n} mixed models: models' PSS per worker MiB vs MLEMU_MAX_LOADED_MB",
          t.get("models_pss_per_worker_mib"), t.get("cap_mib"), "<=", 1.0)
    for kind in ("logreg", "forest", "xgb", "tf"):
        check(f"{n} mixed models: {kind} reload of an evicted version CPU ms vs its first load",
              get(t, "reload", kind, "reload_s"), get(t, "reload", kind, "first_s"), "<=", 1.1,
              1e3)
    # Against one version per model shape (bench/thousand.py shape_of) sent the same sequence of
    # shapes: a forest's call costs many LogisticRegression calls, and an 80-tree forest's eight
    # 10-tree ones, so anything fewer would judge the mix, not the number of versions.
    same_mix = get(t, "templates", "load_c8", "p50_us")
    check(f"{n} mixed models (all loaded): spread c=8 p50 ms vs one model per shape",
          get(t, "all", "load_c8", "p50_us"), same_mix, "<=", 1.2, 1e-3)
    check(f"{n} mixed models under the cap, every version in turn: spread c=8 p50 ms vs the same",
          get(t, "capped", "load_c8", "p50_us"), same_mix, "info", 1.2, 1e-3)
    check(f"{n} models: models.list p50 ms (absolute)", t.get("models_list_p50_ms"), absolute,
          "<", 20.0)
