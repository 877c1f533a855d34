"""A real Prometheus server scrapes a live mlemu; its query API returns the request count sent."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from tests.kit import modelkit
from tests.kit.services import PrometheusServer

pytestmark = pytest.mark.slow

SENT = 17


def test_prometheus_scrapes_mlemu_and_counts_the_requests(tmp_path: Path, live_server) -> None:
    modelkit.sklearn_model(tmp_path / "sk", "logreg", features=4)
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {
        "iris": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}}})
    server = live_server(config, workers=2)
    for _ in range(SENT):
        answer = requests.post(f"{server.url}/v1/projects/p/models/iris:predict",
                               json={"instances": [[1.0, 2.0, 3.0, 4.0]]}, timeout=10)
        assert answer.status_code == 200
    prometheus = PrometheusServer(tmp_path, [server.url.removeprefix("http://")])
    try:
        query = 'sum(mlemu_requests_total{protocol="aiplatform",model="iris",code="200"})'
        deadline = time.monotonic() + 60
        result = prometheus.query(query)
        # The first scrape is a second away, and each worker flushes its counts every second.
        while (not result or float(result[0]["value"][1]) != SENT) and time.monotonic() < deadline:
            time.sleep(0.5)
            result = prometheus.query(query)
        assert result, f"Prometheus never scraped mlemu:\n{prometheus.query('up')}"
        assert float(result[0]["value"][1]) == SENT
        up = prometheus.query('up{job="mlemu"}')
        assert [float(r["value"][1]) for r in up] == [1.0]
    finally:
        prometheus.stop()
