"""gunicorn's child_exit hook: a worker that dies leaves the live gauges (its loaded models stop
counting) while its counters stay in the totals."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.kit import modelkit

pytestmark = pytest.mark.slow

ROW = [1.0, 2.0, 3.0, 4.0]


def scrape(url: str) -> dict[str, float]:
    text = requests.get(f"{url}/metrics", timeout=10).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("model") == "iris" and (
                    sample.name in ("mlemu_models_loaded", "mlemu_model_load_duration_seconds_count")
                    or (sample.name == "mlemu_requests_total" and sample.labels["code"] == "200")):
                found[sample.name] = found.get(sample.name, 0) + sample.value
    return found


def wait_for(url: str, want: dict[str, float]) -> dict[str, float]:
    deadline = time.monotonic() + 60
    found = scrape(url)
    while found != want and time.monotonic() < deadline:
        time.sleep(0.3)
        found = scrape(url)
    return found


def test_a_dead_workers_gauges_go_and_its_counters_stay(tmp_path: Path, live_server: Any) -> None:
    modelkit.sklearn_model(tmp_path / "sk", "logreg", features=4)
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}}})
    server = live_server(config, workers=2)
    url = server.url
    pids = set()
    sent = 0
    while len(pids) < 2 and sent < 200:  # until both workers have answered (and counted)
        answer = requests.post(f"{url}/v1/projects/p/models/iris:predict",
                               json={"instances": [ROW]}, timeout=10)
        assert answer.status_code == 200
        sent += 1
        pids.add(requests.get(f"{url}/healthz", timeout=10).json()["pid"])
    assert len(pids) == 2
    before = {"mlemu_models_loaded": 2, "mlemu_model_load_duration_seconds_count": 2,
              "mlemu_requests_total": sent}
    assert wait_for(url, before) == before
    time.sleep(1.5)  # both workers have flushed their counts (every second)
    dead = pids.pop()
    os.kill(dead, signal.SIGKILL)
    # gunicorn starts a replacement, whose warm-up loads the model again (a third load): two live
    # copies, not three; the dead worker's requests stay counted.
    after = {"mlemu_models_loaded": 2, "mlemu_model_load_duration_seconds_count": 3,
             "mlemu_requests_total": sent}
    assert wait_for(url, after) == after
    # Per-process gauges: the dead pid's are gone; the replacement publishes its own on its
    # task runner's first tick.
    deadline = time.monotonic() + 30
    while True:
        live = {s.labels["pid"] for f in text_string_to_metric_families(
            requests.get(f"{url}/metrics", timeout=10).text) for s in f.samples
            if s.name == "process_resident_memory_bytes"}
        if len(live) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert str(dead) not in live and len(live) == 2
