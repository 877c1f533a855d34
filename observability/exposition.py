"""What GET /metrics and grps's monitoring page answer.

`/metrics` is the Prometheus text format (or OpenMetrics when the scraper asks for it), merged
from every process's files in multiprocess mode. The grps page follows grps's own monitor
(NetEase-Media/grps docs/10_Monitor.md, server/py_server/grps_framework/handler/metrics_handler.py):
an HTML list of `name : value` lines at the server root, with grps's metric names (`*qps`,
`*latency_avg(ms)`, `*latency_cdf(ms)_99`, `*fail_rate(%)`, `*cpu_usage(%)`, `*mem_usage(%)`).
grps computes them over the last second; mlemu has no per-second aggregator, so they are taken
over the whole run from the same counters Prometheus scrapes (docs/observability.md).
"""

from __future__ import annotations

import contextlib
import glob
import html
import os
import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from observability.metric_defs import MULTIPROC_ENV, multiprocess
from observability.metrics import Instruments

#: Protocol labels that are not model serving (left out of the grps page's figures).
_NOT_SERVING = {"health", "metrics", "ml_v1", "other"}


class _ProcessFiles:
    """prometheus_client's MultiProcessCollector over the files that hold values: a file a
    process could not size (an empty one, on a full disk) is left out rather than failing the
    whole scrape."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def collect(self) -> Iterable[Metric]:
        files = []
        for path in glob.glob(os.path.join(self.directory, "*.db")):
            with contextlib.suppress(OSError):
                if os.stat(path).st_size >= 8:  # the used-bytes word and its padding
                    files.append(path)
        return MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-any-return]


def _registry(instruments: Instruments) -> CollectorRegistry:
    """Every process's files merged in multiprocess mode, else this emulator's own registry."""
    instruments.update_process()
    instruments.flush()
    if multiprocess():
        registry = CollectorRegistry()
        registry.register(_ProcessFiles(os.environ[MULTIPROC_ENV]))  # type: ignore[arg-type]
        return registry
    return instruments.registry


def _families(instruments: Instruments) -> Iterable[Metric]:
    return _registry(instruments).collect()


def render(instruments: Instruments, accept: str | None) -> tuple[bytes, str]:
    """The exposition body and its Content-Type for a scraper's Accept header."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(_registry(instruments)), content_type


def _quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's histogram_quantile over cumulative (upper bound, count) pairs."""
    if not buckets or buckets[-1][1] == 0:
        return 0.0
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 0)
        lower, below = bound, count
    return lower


def grps_figures(instruments: Instruments, started_at: float) -> dict[str, float]:
    """grps's monitor names and values, over the run so far."""
    total = failed = seconds = 0.0
    buckets: dict[float, float] = {}
    cpu = rss = 0.0
    for family in _families(instruments):
        for sample in family.samples:
            labels = sample.labels
            if family.name == "mlemu_requests" and sample.name.endswith("_total"):
                if labels.get("protocol") in _NOT_SERVING:
                    continue
                total += sample.value
                code = labels.get("code", "")
                if not (code.startswith("2") or code == "OK"):
                    failed += sample.value
            elif family.name == "mlemu_request_duration_seconds":
                if labels.get("protocol") in _NOT_SERVING:
                    continue
                if sample.name.endswith("_sum"):
                    seconds += sample.value
                elif sample.name.endswith("_bucket"):
                    bound = float(labels["le"])
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name == "process_cpu_seconds_total":
                cpu += sample.value
            elif sample.name == "process_resident_memory_bytes":
                rss += sample.value
    uptime = max(time.time() - started_at, 1e-9)
    cumulative = sorted(buckets.items())
    figures = {
        "qps": total / uptime,
        "latency_avg(ms)": seconds / total * 1000 if total else 0.0,
        "fail_rate(%)": failed / total * 100 if total else 0.0,
        "cpu_usage(%)": cpu / uptime / (os.cpu_count() or 1) * 100,
        "mem_usage(%)": rss / _memory_total() * 100,
    }
    for name, q in (("80", 0.8), ("90", 0.9), ("99", 0.99), ("999", 0.999), ("9999", 0.9999)):
        figures[f"latency_cdf(ms)_{name}"] = _quantile(q, cumulative) * 1000
    return figures


def _memory_total() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return float("inf")


def grps_page(instruments: Instruments, started_at: float) -> str:
    """The monitoring page grps serves at `/`: one `*name : value` line per figure."""
    rows = "".join(
        f'<p class="variable">*{html.escape(name)} : <span id="value-{html.escape(name)}">'
        f"{value:.2f}</span></p>" for name, value in grps_figures(instruments, started_at).items())
    return ("<!DOCTYPE html><html><head><meta http-equiv=\"Content-Type\" content=\"text/html; "
            "charset=UTF-8\"><title>grps metrics</title></head><body><div id=\"layer1\">"
            "<strong>mlemu: grps monitor (since start; Prometheus metrics at /metrics)</strong>"
            f"{rows}</div></body></html>")
