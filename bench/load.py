"""The load scenarios: one-row requests at concurrency 1, 8 and 64, one server under load at a
time; and the side-by-side A/Bs: RandomForest c=1 batched/unbatched, metrics on/off, and each
model's c=8 p99 against the peer with the lowest.

Each round starts every server for one model at a time (only that model loaded, nothing else
running), runs its concurrencies, checks 64 distinct rows in full (first round), and stops it;
the servers take turns in an order that rotates from model to model and round to round, so a
spell of other work on the machine spreads over all of them. The figures are medians over the
rounds.
"""

from __future__ import annotations

import statistics
import traceback
from typing import Any

from bench import measure
from bench.harness import CONCURRENCY, Bench, median_run
from bench.servers import PEERS


def load_rounds(bench: Bench, results: dict[str, Any]) -> None:
    runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    turn = 0
    for r in range(bench.plan.rounds):
        for model in bench.models:
            names = [n for n in bench.names if "failed" not in results["servers"][n]
                     and model in (bench.server(n).measured or bench.server(n).models)]
            turn += 1
            for name in names[turn % max(1, len(names)):] + names[:turn % max(1, len(names))]:
                server = bench.server(name)
                try:
                    proc, _ = bench.start(server, (model,), f"load-{model}-{r}")
                except Exception as exc:  # a peer that cannot serve a model loses only that
                    traceback.print_exc()
                    results["servers"][name].setdefault("load_failed", {})[model] = repr(exc)
                    continue
                try:
                    for c in CONCURRENCY:
                        runs.setdefault((name, model, c), []).append(bench.one_load(server, model, c))
                    if r == 0:
                        measure.check_distinct(
                            lambda rows, s=server, m=model: (s.url(m), s.body(rows)),
                            server.predictions, bench.rows, bench.want[model],
                            f"{name}/{model}/distinct rows")
                        results["servers"][name].setdefault("memory_after_load", {})[model] = \
                            measure.memory(proc.pid)
                finally:
                    measure.stop(proc)
    for (name, model, c), figures in runs.items():
        load = results["servers"][name].setdefault("load", {}).setdefault(model, {})
        load[f"c{c}"] = median_run(figures)


def _taking_turns(bench: Bench, names: tuple[str, str], model: str, concurrencies: tuple[int, ...],
                  tag: str) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Two servers up side by side with `model`, taking turns run by run at each concurrency
    (the idle one takes no CPU; who goes first alternates): every run's figures, per server and
    concurrency."""
    servers = [bench.server(name) for name in names]
    procs = []
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {s.name: {} for s in servers}
    try:
        for server in servers:
            procs.append(bench.start(server, (model,), tag)[0])
        for c in concurrencies:
            for server in servers:
                measure.wrk(server.url(model), bench.body_file(server, model), c,
                            bench.plan.warmup)
            for i in range(bench.plan.ab_rounds):
                for server in servers[i % 2:] + servers[:i % 2]:
                    result = bench.timed_load(server, model, c, max(1.0, bench.plan.seconds / 2))
                    if result["errors"]:
                        raise measure.CheckFailed(f"{server.name}: errors in the A/B run")
                    runs[server.name].setdefault(c, []).append(result)
    finally:
        for proc in procs:
            measure.stop(proc)
    return runs


def ab_forest_c1(bench: Bench) -> dict[str, Any]:
    """RandomForest at c=1, batched and unbatched mlemu side by side, taking turns (c=1 keeps
    one request in flight at a time: the idle server takes no CPU)."""
    runs = _taking_turns(bench, ("mlemu", "mlemu-unbatched"), "forest", (1,), "ab")
    p50s = {name: [r["p50_us"] for r in by_c[1]] for name, by_c in runs.items()}
    out = {"batched_p50_us": statistics.median(p50s["mlemu"]),
           "unbatched_p50_us": statistics.median(p50s["mlemu-unbatched"]), "runs": p50s}
    bench.log(f"forest c=1 p50 batched {out['batched_p50_us'] / 1e3:.2f} ms, unbatched "
              f"{out['unbatched_p50_us'] / 1e3:.2f} ms")
    return out


def ab_metrics(bench: Bench) -> dict[str, Any]:
    """LogisticRegression requests/s with metrics on and off (issue 18's rows), mlemu and
    mlemu-nometrics side by side taking turns at each concurrency (the idle one takes no CPU).
    A 5 % difference needs this: in the load phase the two run minutes apart, and this machine's
    speed drifts by more than that from one minute to the next."""
    runs = _taking_turns(bench, ("mlemu", "mlemu-nometrics"), "logreg", (1, 8, 64), "ab-metrics")
    rps = {name: {f"c{c}": [r["rps"] for r in results] for c, results in by_c.items()}
           for name, by_c in runs.items()}
    out: dict[str, Any] = {"runs": rps}
    for c, on_runs in rps["mlemu"].items():
        on, off = statistics.median(on_runs), statistics.median(rps["mlemu-nometrics"][c])
        out[c] = {"on_rps": on, "off_rps": off}
        bench.log(f"logreg {c} metrics on {on:.0f} rps, off {off:.0f} rps ({on / off:.2f}x)")
    return out


def ab_tail(bench: Bench, results: dict[str, Any]) -> dict[str, Any]:
    """Each model's c=8 p99 (issue 21: "no worse than the best peer's, at every model"), mlemu and
    the peer with the lowest p99 in the load phase side by side, taking turns run by run.

    A p99 is the slowest hundredth of a run, so a spell of other work on this shared machine
    moves it far more than a median: in one load phase KServe's LogisticRegression c=8 p99 was
    3.3, 4.2, 4.5 and 5.6 ms in four rounds. Alternating ab_rounds runs puts both servers
    through the same spells; the figure is each one's median p99."""
    out: dict[str, Any] = {}
    servers = results["servers"]
    for model in bench.models:
        p99s = {name: servers.get(name, {}).get("load", {}).get(model, {}).get("c8", {})
                .get("p99_us") for name in bench.names if name in PEERS}
        measured = {name: p99 for name, p99 in p99s.items() if p99 is not None}
        if "mlemu" not in bench.names or not measured:
            continue
        peer = min(measured, key=lambda name: measured[name])
        try:
            runs = _taking_turns(bench, ("mlemu", peer), model, (8,), f"tail-{model}")
        except Exception:  # one model's failure must not lose the others' figures
            traceback.print_exc()
            continue
        tails = {name: [r["p99_us"] for r in by_c[8]] for name, by_c in runs.items()}
        out[model] = {"peer": peer, "mlemu_p99_us": statistics.median(tails["mlemu"]),
                      "peer_p99_us": statistics.median(tails[peer]), "runs": tails}
        bench.log(f"{model} c=8 p99 mlemu {out[model]['mlemu_p99_us'] / 1e3:.2f} ms, {peer} "
                  f"{out[model]['peer_p99_us'] / 1e3:.2f} ms")
    return out
