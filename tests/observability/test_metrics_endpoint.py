"""GET /metrics and grps's monitor page in-process: open with IAM off, closed to anonymous
scrapers with IAM enforced unless MLEMU_METRICS_PUBLIC, gone with MLEMU_METRICS=false."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests import modelkit

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
