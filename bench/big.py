"""Large requests (1,000 and 10,000 instances x 30 features): every server serving the model and
the in-process floor take turns call by call (measure.interleaved). Only one request is in flight
at any moment, so the servers that are up meanwhile sit idle. TensorFlow models are compared with
the naive Flask + TensorFlow server and their signature-call floor."""

from __future__ import annotations

import json
import traceback
from typing import Any

from bench import measure, models
from bench.harness import BIG, Bench


def big_requests(bench: Bench, results: dict[str, Any]) -> None:
    for model in bench.models:
        if model not in bench.dirs:
            continue
        running = []
        try:
            for name in bench.names:
                server = bench.server(name)
                if not server.full or model not in server.models \
                        or "failed" in results["servers"][name]:
                    continue
                try:
                    running.append((server, bench.start(server, (model,), f"big-{model}")[0]))
                except Exception as exc:
                    traceback.print_exc()
                    results["servers"][name].setdefault("big_failed", {})[model] = repr(exc)
            if running:
                _one_model(bench, model, [s for s, _ in running], results)
        finally:
            for _, proc in running:
                measure.stop(proc)


def _one_model(bench: Bench, model: str, servers: list[Any], results: dict[str, Any]) -> None:
    tf = model in models.TF_MODELS
    for n in BIG:
        body = json.dumps({"instances": bench.big[n]}).encode()
        if tf:
            model_alone, full = models.tf_floor_calls(bench.dirs[model], body)
        else:
            model_alone, full = models.floor_calls(bench.dirs[model], model, body)
        clients = {s.name: measure.BigClient(s.url(model), s.body(bench.big[n]), s.predictions,
                                             bench.want_big[model, n],
                                             f"{s.name}/{model}/{n} instances")
                   for s in servers}
        try:
            contestants: dict[str, measure.Contestant] = {
                name: (client, client.check) for name, client in clients.items()}
            contestants["floor"] = (full, None)
            figures = measure.interleaved(contestants, bench.plan.big_repeats)
        finally:
            for client in clients.values():
                client.close()
        floor = figures.pop("floor")
        alone = measure.interleaved({"model": (model_alone, None)}, bench.plan.floor_repeats)
        results["floor"][f"{model}/{n}"] = {"full_s": floor["min_s"],
                                           "model_s": alone["model"]["min_s"]}
        bench.log(f"floor/{model}/{n} instances: best {floor['min_s'] * 1e3:.1f} ms")
        for name, figure in figures.items():
            results["servers"][name].setdefault("big", {}).setdefault(model, {})[str(n)] = figure
            bench.log(f"{name}/{model}/{n} instances: best {figure['min_s'] * 1e3:.1f} ms, "
                      f"median {figure['median_s'] * 1e3:.1f} ms")
