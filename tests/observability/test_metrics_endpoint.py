"""GET /metrics and grps's monitor page in-process: open with IAM off, closed to anonymous
scrapers with IAM enforced unless MLEMU_METRICS_PUBLIC, gone with MLEMU_METRICS=false."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.kit import modelkit

ROW = [5.1, 3.5, 1.4, 0.2]


def bootstrap(tmp_path: Path) -> Path:
    modelkit.sklearn_model(tmp_path / "sk", "logreg", features=4)
    return modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}}})


def test_open_with_iam_off_and_counts_in_process(make_app: Any, tmp_path: Path) -> None:
    client = make_app(bootstrap(tmp_path))
    for _ in range(3):
        assert client.post("/v1/projects/p/models/iris:predict",
                           json={"instances": [ROW, ROW]}).status_code == 200
    answer = client.get("/metrics")
    assert answer.status_code == 200 and answer.content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(answer.get_data(as_text=True))}
    requests = [s for s in families["mlemu_requests"].samples if s.name == "mlemu_requests_total"
                and s.labels["model"] == "iris" and s.labels["protocol"] == "aiplatform"]
    assert requests and requests[0].labels["version"] == "v1" and requests[0].value >= 3
    assert "process_resident_memory_bytes" in families  # the standard process collector
    page = client.get("/")
    assert page.status_code == 200 and page.content_type.startswith("text/html")
    assert "*qps : " in page.get_data(as_text=True)
    assert "*latency_cdf(ms)_99 : " in page.get_data(as_text=True)


def test_closed_to_scrapers_with_iam_enforced_unless_public(make_app: Any, tmp_path: Path) -> None:
    closed = make_app(iam_mode="enforce")
    answer = closed.get("/metrics")
    assert answer.status_code == 403
    assert "MLEMU_METRICS_PUBLIC" in answer.get_data(as_text=True)
    assert closed.get("/").status_code == 403
    assert make_app(iam_mode="enforce", metrics_public=True).get("/metrics").status_code == 200


def test_metrics_off_records_nothing_and_serves_no_page(make_app: Any, tmp_path: Path) -> None:
    client = make_app(bootstrap(tmp_path), metrics=False)
    assert client.emu.instruments is None
    assert client.post("/v1/projects/p/models/iris:predict",
                       json={"instances": [ROW]}).status_code == 200
    assert client.get("/metrics").status_code == 404
    assert client.get("/").status_code == 404


def test_two_emulators_in_one_process_count_apart(make_app: Any, tmp_path: Path) -> None:
    config = bootstrap(tmp_path)
    one, two = make_app(config), make_app(config, state_dir=tmp_path / "other")
    assert one.emu.instruments.registry is not two.emu.instruments.registry
    for _ in range(4):
        one.post("/v1/projects/p/models/iris:predict", json={"instances": [ROW]})
    two.post("/v1/projects/p/models/iris:predict", json={"instances": [ROW]})

    def served(client: Any) -> float:
        text = client.get("/metrics").get_data(as_text=True)
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == "mlemu_requests_total" and s.labels["model"] == "iris")

    assert (served(one), served(two)) == (4, 1)


def test_an_instrumented_predictor_is_freed_when_dropped(tmp_path: Path) -> None:
    import gc
    import weakref

    from observability.metrics import Instruments
    from registry.deployments import Deployments
    from registry.resources import Version

    modelkit.sklearn_model(tmp_path / "sk", "logreg", features=4)
    deployments = Deployments(tmp_path / "packages", instruments=Instruments())
    version = Version(name="projects/p/models/iris/versions/v1",
                      deployment_uri=str(tmp_path / "sk"))
    predictor = deployments.get(version)
    assert predictor.predict([ROW]) is not None  # the timed method
    ref = weakref.ref(predictor)
    del predictor
    gc.disable()  # freed by reference counting alone: the timed methods hold no cycle
    try:
        deployments.drop(version.name)
        assert ref() is None
    finally:
        gc.enable()


def test_fast_path_requests_and_model_calls_are_counted_once(make_app: Any, tmp_path: Path,
                                                             caplog: Any) -> None:
    """Plain :predict requests take the fast path, which counts them itself (in front of the
    observability middleware) and whose batcher times the model calls itself: each request and
    each model call is counted exactly once, errors with their status, and access-logged."""
    from protocols.aiplatform import PredictFastPath
    from tests.conftest import fast_path_of

    client = make_app(bootstrap(tmp_path), access_log=True)
    assert isinstance(client.application.wsgi_app.app, PredictFastPath)  # behind Vertex AI's
    assert fast_path_of(client.application).observed is not None
    caplog.set_level("INFO", logger="mlemu.access")
    for _ in range(3):
        assert client.post("/v1/projects/p/models/iris:predict",
                           json={"instances": [ROW, ROW]}).status_code == 200
    bad = client.post("/v1/projects/p/models/iris/versions/v1:predict",
                      json={"instances": [[1.0, 2.0]]})  # 2 features for a 4-feature model
    assert bad.status_code == 400 and "Prediction failed" in bad.get_json()["error"]
    assert client.post("/v1/projects/p/models/nope:predict",
                       json={"instances": [ROW]}).status_code == 404
    families = {f.name: f for f in text_string_to_metric_families(
        client.get("/metrics").get_data(as_text=True))}

    def value(family: str, sample: str, **labels: str) -> float:
        found = [s.value for s in families[family].samples if s.name == sample
                 and all(s.labels.get(k) == v for k, v in labels.items())]
        assert len(found) == 1, (sample, labels, found)
        return found[0]

    fast = {"transport": "http", "protocol": "aiplatform", "method": "predict"}
    assert value("mlemu_requests", "mlemu_requests_total", **fast, model="iris", version="v1",
                 code="200") == 3
    assert value("mlemu_requests", "mlemu_requests_total", **fast, model="iris", version="v1",
                 code="400") == 1
    assert value("mlemu_requests", "mlemu_requests_total", **fast, model="", code="404") == 1
    assert value("mlemu_request_duration_seconds", "mlemu_request_duration_seconds_count", **fast,
                 model="iris", version="v1") == 4
    version = {"model": "iris", "version": "v1"}
    assert value("mlemu_model_call_duration_seconds",
                 "mlemu_model_call_duration_seconds_count", **version) == 4  # the failed one too
    assert value("mlemu_instances_per_request", "mlemu_instances_per_request_sum",
                 **version) == 7
    logged = [r.httpRequest for r in caplog.records if hasattr(r, "httpRequest")]
    assert [e["status"] for e in logged if "iris" in e["requestUrl"] or "nope" in e["requestUrl"]
            ] == [200, 200, 200, 400, 404]
    assert logged[0]["requestMethod"] == "POST" and logged[0]["responseSize"]


def _series(client: Any) -> int:
    text = client.get("/metrics").get_data(as_text=True)
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def test_no_path_adds_a_series(make_app: Any, tmp_path: Path) -> None:
    """Label values come from fixed sets or the registry: made-up paths under every protocol's
    prefix (grps's groups included), anonymous 404s and all, add no `method` (or model) label."""
    client = make_app(bootstrap(tmp_path))
    paths = ["/grps/v1/{group}/x{n}", "/grps/v1/{group}/predict{n}", "/grps/v1/{group}/{n}",
             "/v1/models/m{n}:predict", "/v2/models/m{n}/infer", "/v1/projects/p/models/m{n}",
             "/v1/projects/p/models/m{n}:predict", "/nowhere/{n}"]

    def burst(start: int) -> None:
        for n in range(start, start + 40):
            for group in ("health", "infer", "metadata"):
                for path in paths:
                    client.post(path.format(group=group, n=n), data=b"{}")
    burst(0)
    _series(client)  # the first scrape adds the scrapes' own series
    before = _series(client)
    burst(1000)
    assert _series(client) == before
    families = {f.name: f for f in text_string_to_metric_families(
        client.get("/metrics").get_data(as_text=True))}
    methods = {s.labels["method"] for s in families["mlemu_requests"].samples
               if s.labels.get("protocol") == "grps"}
    assert methods <= {"other", "infer.predict", "health.ready", "metadata.model"}, methods
