"""End to end: with MLEMU_MAX_LOADED_VERSIONS below the number of versions, the server still
becomes ready, a version the cap unloaded reloads on its next request and answers exactly as
before, and every version keeps answering its own predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import requests

from registry import footprint
from tests.kit import modelkit

ROWS = [[0.5, -1.0, 2.0, 0.1], [-1.5, 0.3, 0.0, 1.2], [2.0, 2.0, -2.0, 0.4]]
PREFIX = "projects/p/models/m/versions"


def _models(tmp_path: Path, count: int) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """`count` LogisticRegression versions trained on different data (different answers)."""
    versions, want = {}, {}
    for i in range(count):
        model = modelkit.sklearn_model(tmp_path / f"v{i}", kind="logreg", seed=i)
        versions[f"v{i}"] = {"deploymentUri": str(tmp_path / f"v{i}"), "framework": "SCIKIT_LEARN"}
        want[f"v{i}"] = model.predict(np.asarray(ROWS)).tolist()
    return versions, want


def test_unloaded_versions_reload_with_the_same_answer(make_app: Any, tmp_path: Path) -> None:
    versions, _ = _models(tmp_path, 3)
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"m": {"versions": versions}})
    client = make_app(config, max_loaded_versions=2)
    client.emu.warm_up()  # loads all three once (each checked), keeps the two most recent
    deployments = client.emu.deployments
    assert sorted(deployments.loaded()) == [f"{PREFIX}/v1", f"{PREFIX}/v2"]
    assert client.get("/readyz").status_code == 200  # v0 was unloaded by the cap, not broken
    first = client.post("/v1/projects/p/models/m/versions/v0:predict", json={"instances": ROWS})
    assert first.status_code == 200, first.json
    assert sorted(deployments.loaded()) == [f"{PREFIX}/v0", f"{PREFIX}/v2"]  # v1 went
    for _ in range(2):
        for v in ("v1", "v2", "v0"):
            again = client.post(f"/v1/projects/p/models/m/versions/{v}:predict",
                                json={"instances": ROWS})
            assert again.status_code == 200, again.json
            if v == "v0":
                assert again.data == first.data
            assert len(deployments.loaded()) == 2


def test_live_server_serves_more_versions_than_it_keeps_loaded(live_server: Any,
                                                              tmp_path: Path) -> None:
    versions, want = _models(tmp_path, 4)
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"m": {"versions": versions}})
    server = live_server(config, env={"MLEMU_MAX_LOADED_VERSIONS": "2"})  # waits for /readyz
    session = requests.Session()
    answers: dict[str, bytes] = {}
    for _ in range(3):  # round-robin over 4 versions with room for 2: every request reloads
        for v, expected in want.items():
            r = session.post(f"{server.url}/v1/projects/p/models/m/versions/{v}:predict",
                             json={"instances": ROWS}, timeout=60)
            assert r.status_code == 200, r.text
            assert answers.setdefault(v, r.content) == r.content  # the same bytes after a reload
            assert r.json()["predictions"] == expected
    log = server.output()
    assert f"unloaded {PREFIX}/v0: least recently used" in log
    assert "Traceback" not in log


def test_warm_up_past_readiness_stops_when_the_cap_is_full(make_app: Any, tmp_path: Path) -> None:
    versions, want = _models(tmp_path, 4)
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"m": {"versions": versions}})
    client = make_app(config, max_loaded_versions=2, ready_versions=1)
    client.emu.warm_up()
    deployments = client.emu.deployments
    # v0 before readiness; v1 in the background while there was room; v2 and v3 on demand.
    assert sorted(deployments.loaded()) == [f"{PREFIX}/v0", f"{PREFIX}/v1"]
    assert client.get("/readyz").status_code == 200
    assert client.get("/v2/health/ready").status_code == 200
    r = client.post(f"/v1/{PREFIX}/v3:predict", json={"instances": ROWS})
    assert r.status_code == 200 and r.json["predictions"] == want["v3"]
    assert sorted(deployments.loaded()) == [f"{PREFIX}/v1", f"{PREFIX}/v3"]


def _metric(text: str, name: str) -> float:
    """The sum of a metric's samples in a Prometheus text exposition."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def test_live_server_under_a_memory_cap_serves_more_than_fit(live_server: Any,
                                                            tmp_path: Path) -> None:
    # A LogisticRegression version is estimated at a little over 256 KiB, and each version the
    # worker served and unloaded still counts its residue (registry/footprint.py): once all six
    # were served, `fit` of them fit in 1 MiB beside the others' residue, not six.
    versions, want = _models(tmp_path, 6)
    each = footprint.estimate(versions["v0"]["deploymentUri"], "SCIKIT_LEARN")
    residue = footprint.RESIDUE["multiprocess"]  # one gunicorn worker: multiprocess metrics
    fit = max(k for k in range(1, 7) if k * each + (6 - k) * residue <= 1 << 20)
    assert 1 < fit < 6
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"m": {"versions": versions}})
    server = live_server(config, env={"MLEMU_MAX_LOADED_MB": "1"})
    session = requests.Session()
    for _ in range(2):
        for v, expected in want.items():
            r = session.post(f"{server.url}/v1/{PREFIX}/{v}:predict", json={"instances": ROWS},
                             timeout=60)
            assert r.status_code == 200, r.text
            assert r.json()["predictions"] == expected
    metrics = session.get(f"{server.url}/metrics", timeout=60).text
    assert _metric(metrics, "mlemu_model_evictions_total") >= 6
    loaded = _metric(metrics, "mlemu_models_loaded_bytes")
    assert 0 < loaded <= 1 << 20
    assert _metric(metrics, "mlemu_models_loaded") == fit
    log = server.output()
    assert "MLEMU_MAX_LOADED_MB" in log and "Traceback" not in log


def test_warm_up_past_readiness_stops_at_its_first_eviction_under_a_memory_cap(
        make_app: Any, tmp_path: Path) -> None:
    versions, _ = _models(tmp_path, 6)
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"m": {"versions": versions}})
    # Each LogisticRegression version is a little over 256 KiB (registry/footprint.py): after
    # v3 loads, one must go and warm-up stops there (the rest load on demand).
    client = make_app(config, max_loaded_versions=0, max_loaded_mb=1, ready_versions=1)
    client.emu.warm_up()
    deployments = client.emu.deployments
    assert deployments.evicted == 1
    assert sorted(deployments.loaded()) == [f"{PREFIX}/v1", f"{PREFIX}/v2", f"{PREFIX}/v3"]
