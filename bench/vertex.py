"""Vertex AI `endpoints.predict` against ml v1 `:predict`: one mlemu server at its defaults, one
scikit-learn LogisticRegression served both as an ml v1 version (from the bootstrap file) and
as a model deployed to a Vertex AI endpoint (uploaded and deployed through the REST API, as a
user's SDK does), one-row requests at c=8 on both routes taking turns run by run.

Both routes end in the same predictor in the same processes (DESIGN.md, "one data plane"), so
what this measures is the Vertex route's own cost: its fast path, the endpoint and traffic-split
lookup and its larger answer (`deployedModelId`, `model`, ...). Taking turns puts both through
the same spells of other work on this shared machine; the figures are medians over the runs.
Every answer is checked as in the other phases: the first, sampled ones during each run and 64
distinct rows on both routes afterwards. Beside the speed, each run records the server's CPU
time per request (its process tree's, sampler requests included, the same for both routes): what
a route costs, which the machine's other work moves far less than requests/s.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import measure
from bench.harness import Bench, median_run
from bench.servers import Mlemu, Server

MODEL = "logreg"
CONCURRENCY = 8
LOCATION = "us-central1"
# Vertex AI's prebuilt scikit-learn prediction image: its name picks the framework
# (docs/vertex.md, "Frameworks").
SKLEARN_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"


class Route(Server):
    """One prediction route of an mlemu server that is already running (no process of its own):
    what the harness's load and check steps need, its URL fixed once the resources exist."""

    def __init__(self, workdir: Path, name: str, url: str) -> None:
        super().__init__(workdir)
        self.name = name
        self._url = url

    def url(self, model: str) -> str:
        return self._url

    def settings(self) -> str:
        return f"a route of mlemu: {self._url}"


def ml_v1_url(port: int, project: str, model: str) -> str:
    """The version's own `:predict` (AI Platform Prediction's `projects.predict`,
    `POST /v1/{name=projects/**}:predict` with `name` a model or one of its versions:
    https://cloud.google.com/ai-platform/prediction/docs/reference/rest/v1/projects/predict)."""
    return f"http://127.0.0.1:{port}/v1/projects/{project}/models/{model}/versions/v1:predict"


def _operation(base: str, answer: Any) -> dict[str, Any]:
    """The finished long-running operation `answer` started (polled until `done`), or
    RuntimeError with its error."""
    op = answer
    deadline = time.monotonic() + 300
    while not op.get("done"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"operation {op.get('name')} not done within 300 s")
        time.sleep(0.2)
        status, op = measure.get_json(f"{base}/v1/{op['name']}")
        if status != 200:
            raise RuntimeError(f"operations.get answered {status}: {op!r:.300}")
    if "error" in op:
        raise RuntimeError(f"operation {op['name']} failed: {op['error']}")
    return dict(op["response"])


def deploy(port: int, project: str, model_dir: Path) -> str:
    """Upload `model_dir` as a Vertex AI model, create an endpoint and deploy the model to it;
    the endpoint's `:predict` URL.

    The calls and bodies are the API's own (googleapis/googleapis
    google/cloud/aiplatform/v1/model_service.proto UploadModel `{parent}/models:upload`,
    endpoint_service.proto CreateEndpoint `{parent}/endpoints` and DeployModel
    `{endpoint}:deployModel`, prediction_service.proto Predict `{endpoint}:predict`), each a
    long-running operation whose `response` is the resource."""
    base = f"http://127.0.0.1:{port}"
    parent = f"{base}/v1/projects/{project}/locations/{LOCATION}"

    def call(url: str, body: dict[str, Any]) -> dict[str, Any]:
        status, answer = measure.post(url, json.dumps(body).encode())
        if status != 200:
            raise RuntimeError(f"POST {url} answered {status}: {answer!r:.300}")
        return _operation(base, answer)

    model = call(f"{parent}/models:upload", {"model": {
        "displayName": "bench-logreg", "artifactUri": str(model_dir),
        "containerSpec": {"imageUri": SKLEARN_IMAGE}}})["model"]
    endpoint = call(f"{parent}/endpoints", {"displayName": "bench"})["name"]
    call(f"{base}/v1/{endpoint}:deployModel", {"deployedModel": {
        "model": model, "dedicatedResources": {
            "machineSpec": {"machineType": "n1-standard-2"}, "minReplicaCount": 1}}})
    return f"{base}/v1/{endpoint}:predict"


def vertex_ab(bench: Bench) -> dict[str, Any]:
    """c=8 one-row load on the ml v1 version and the Vertex AI endpoint serving the same model
    in one server, taking turns (Plan.ab_rounds runs each, who goes first alternating): each
    route's median figures and every run's."""
    server = bench.server("mlemu")
    assert isinstance(server, Mlemu)
    proc, _ = bench.start(server, (MODEL,), "vertex")
    try:
        routes = [Route(server.workdir, "ml-v1", ml_v1_url(server.port, "bench", MODEL)),
                  Route(server.workdir, "vertex",
                        deploy(server.port, "bench", bench.dirs[MODEL]))]
        for route in routes:  # the endpoint answers, and answers right, before any timing
            measure.wait_ready(lambda r=route: bench.correct(r, MODEL), proc, 300)
            measure.wrk(route.url(MODEL), bench.body_file(route, MODEL), CONCURRENCY,
                        bench.plan.warmup)
        runs: dict[str, list[dict[str, Any]]] = {r.name: [] for r in routes}
        for i in range(bench.plan.ab_rounds):
            for route in routes[i % 2:] + routes[:i % 2]:
                cpu = measure.cpu_seconds(proc.pid)
                result = bench.timed_load(route, MODEL, CONCURRENCY,
                                          max(1.0, bench.plan.seconds / 2))
                result["cpu_us_per_request"] = ((measure.cpu_seconds(proc.pid) - cpu) * 1e6
                                                / max(1, result["requests"]))
                if result["errors"]:
                    raise measure.CheckFailed(f"{route.name}: {result['errors']} errors at c=8")
                runs[route.name].append(result)
        for route in routes:
            measure.check_distinct(lambda rows, r=route: (r.url(MODEL), r.body(rows)),
                                   route.predictions, bench.rows, bench.want[MODEL],
                                   f"{route.name}/{MODEL}/distinct rows")
    finally:
        measure.stop(proc)
    out: dict[str, Any] = {}
    for name, results in runs.items():
        out[name] = median_run(results)
        out[name]["cpu_us_per_request"] = statistics.median(
            r["cpu_us_per_request"] for r in results)
    v1, vertex = out["ml-v1"], out["vertex"]
    bench.log(f"c=8 ml v1 {v1['rps']:.0f} rps p50 {v1['p50_us'] / 1e3:.2f} ms p99 "
              f"{v1['p99_us'] / 1e3:.2f} ms; Vertex {vertex['rps']:.0f} rps p50 "
              f"{vertex['p50_us'] / 1e3:.2f} ms p99 {vertex['p99_us'] / 1e3:.2f} ms "
              f"({vertex['rps'] / v1['rps']:.2f}x; medians of {len(runs['vertex'])} runs each); "
              f"server CPU per request ml v1 {v1['cpu_us_per_request']:.0f} us, Vertex "
              f"{vertex['cpu_us_per_request']:.0f} us")
    return out
