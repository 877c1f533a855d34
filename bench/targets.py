"""The targets (issues 8 and 21), each with the measured figures, their ratio and whether it is
met, and the small helpers the figures table shares (bench/report.py)."""

from __future__ import annotations

from typing import Any

from bench.servers import MODEL_SERVERS, PEERS


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


def checks(results: dict[str, Any]) -> list[Check]:
    """(label, mlemu's figure, reference, op, bound); a reference of 1.0 makes the bound absolute."""
    s = results["servers"]
    out: list[Check] = []

    def peers(path: tuple[str, ...], higher: bool, among: tuple[str, ...] = PEERS) -> float | None:
        return best_peer({n: get(s.get(n, {}), *path) for n in among}, higher, among)

    def mine(path: tuple[str, ...]) -> float | None:
        return get(s.get("mlemu", {}), *path)

    def check(label: str, a: float | None, b: float | None, op: str, bound: float,
              scale: float = 1.0) -> None:
        out.append((label, None if a is None else a * scale, None if b is None else b * scale,
                    op, bound))

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
    many = results.get("many", {})
    n = many.get("versions", 200)
    check(f"{n} models: time to ready s vs one model", get(many, "all", "ready_s"),
          get(many, "one", "ready_s"), "<=", 3.0)
    check(f"{n} models: spread c=8 p50 ms vs one model", get(many, "all", "load_c8", "p50_us"),
          get(many, "one", "load_c8", "p50_us"), "<=", 1.1, 1e-3)
    check("PSS per extra loaded LogisticRegression version MiB (absolute)",
          many.get("pss_per_extra_version_mib"), 1.0 if many else None, "<=", 2.0)
    cold = ("cold_start_s",)
    check("cold start s (one sklearn model) vs best model server", mine(cold),
          peers(cold, False, MODEL_SERVERS), "<=", 0.5)
    pss = ("idle_one_sklearn_model", "pss_mib")
    check("idle PSS MiB (one sklearn model) vs best model server", mine(pss),
          peers(pss, False, MODEL_SERVERS), "<=", 0.5)
    batch = results.get("batch", {})  # issue 19: batch prediction jobs (bench/batch.py)
    check("batch job, 1 worker, instances/s vs in-process floor (a fresh process)",
          batch.get("w1_rate"), batch.get("floor_rate"), ">=", 0.8)
    check("batch job, 1 worker vs the floor run with its framework already imported",
          batch.get("w1_rate"), batch.get("floor_warm_rate"), "info", 0.7)
    check("batch job, 2 workers, instances/s vs 1 worker", batch.get("w2_rate"),
          batch.get("w1_rate"), ">=", 1.6)
    check("batch job, 2 workers vs 1 worker on the CPU critical path (a free core each)",
          batch.get("w2_path_rate"), batch.get("w1_path_rate"), ">=", 1.6)
    check("batch job, 2 workers vs 1 worker, wall less the CPU run-queue wait (free cores)",
          batch.get("w2_free_rate"), batch.get("w1_free_rate"), "info", 1.6)
    return out


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
