"""The vertex and demo phases' decisions and parsing, without servers: when memory has settled,
which requests the demo reading sends, the routes' URLs, and `--into` for the new phases."""

from __future__ import annotations

from pathlib import Path

from bench import demo, vertex
from bench.__main__ import SELF_CONTAINED, merged_into


def test_settled_needs_enough_readings_within_the_tolerance() -> None:
    assert not demo.settled([500.0, 500.5])  # too few readings to tell
    assert demo.settled([300.0, 500.0, 501.0, 500.2])
    assert not demo.settled([480.0, 500.0, 501.0])
    assert demo.settled([10.0, 11.0, 12.0], n=3, tolerance=2.0)
    assert not demo.settled([10.0, 11.0, 12.5], n=3, tolerance=2.0)


def test_demo_requests_cover_every_bootstrap_version() -> None:
    import yaml

    config = yaml.safe_load((demo.ROOT / "demo" / "bootstrap.yaml").read_text())
    versions = {f"/v1/projects/demo/models/{model}/versions/{version}:predict"
                for model, spec in config["projects"]["demo"]["models"].items()
                for version in spec["versions"]}
    assert {path for path, _, _ in demo.requests()} == versions


def test_half_plus_three_check_rejects_a_wrong_answer() -> None:
    (check,) = [c for path, _, c in demo.requests() if "half_plus_three" in path]
    assert check([3.5, 4.0, 5.5])
    assert not check([3.5, 4.0, 5.0])


def test_routes_address_the_version_and_the_endpoint(tmp_path: Path) -> None:
    assert vertex.ml_v1_url(8080, "bench", "logreg") == \
        "http://127.0.0.1:8080/v1/projects/bench/models/logreg/versions/v1:predict"
    route = vertex.Route(tmp_path, "vertex", "http://h/v1/projects/p/locations/l/endpoints/1:predict")
    assert route.url("logreg").endswith("/endpoints/1:predict")
    assert route.predictions({"predictions": [1], "deployedModelId": "2"}) == [1]


def test_into_replaces_only_the_rerun_phases() -> None:
    assert SELF_CONTAINED["vertex"] == "ab_vertex" and SELF_CONTAINED["demo"] == "demo"
    earlier = {"demo": {"idle": {"pss_mib": 1277.0}}, "ab_vertex": {"old": 1}, "many": {"x": 1}}
    rerun = {"demo": {"idle": {"pss_mib": 700.0}}, "command": "python -m bench --phases demo",
             "elapsed_s": 60.0, "environment": {"date_utc": "2026-11-28 19:00",
                                                "mlemu_commit": "abc"}}
    merged = merged_into(earlier, rerun, ["demo"])
    assert merged["demo"] == {"idle": {"pss_mib": 700.0}}
    assert merged["ab_vertex"] == {"old": 1} and merged["many"] == {"x": 1}
    assert merged["reruns"][0]["phases"] == ["demo"]


def test_cpu_seconds_counts_this_process_tree() -> None:
    import os
    import time

    from bench import measure

    before = measure.cpu_seconds(os.getpid())
    start = time.process_time()
    while time.process_time() - start < 0.3:  # burn CPU: what is counted, not how fast
        sum(range(1000))
    assert measure.cpu_seconds(os.getpid()) - before >= 0.2


def test_per_process_lists_this_process_with_its_pss() -> None:
    import os
    import sys

    (me,) = [p for p in demo.per_process(os.getpid()) if p["pid"] == os.getpid()]
    assert me["pss_mib"] > 0 and sys.executable.rsplit("/", 1)[-1] in me["command"]


def test_demo_starts_what_the_makefile_serve_target_runs() -> None:
    """The phase measures `make serve`: the same settings and bootstrap file as its command."""
    makefile = (demo.ROOT / "Makefile").read_text().split("\nserve:", 1)[1].split("\n\n", 1)[0]
    (command,) = [line.strip() for line in makefile.splitlines() if " serve " in line
                  and not line.strip().startswith("@")]
    settings = dict(word.split("=", 1) for word in command.split() if word.startswith("MLEMU_"))
    assert settings == demo.SERVE_ENV
    assert "--config demo/bootstrap.yaml" in command
