"""The console's "Metrics at a glance": requests per second, p50/p99 latency and errors per model
over the samples kept (console/metrics_data.py), batching's merge ratio and model loads.

The page draws its charts on the server (console/charts.py); its script asks for the charts'
fragment again every few seconds, which takes a new sample when the last is old enough.
"""

from __future__ import annotations

from typing import Any

from flask import Response, request

from console import charts, overview
from console.metrics_data import between, merge_ratio, pairs
from console.web import emulator, metrics_sample, page, state, visitor


def _figures() -> dict[str, Any]:
    who = visitor()  # signed in (IAM enforced) before any figure is shown
    sample = metrics_sample()
    if sample is None:
        return {"off": True}
    emu = emulator()
    project = request.args.get("project") or emu.settings.default_project
    visible = overview.visible_models(emu, who.caller, project)

    def shown(model: str) -> bool:
        return visible is None or model in visible

    history = state().history
    series = {model: points for model, points in history.points().items() if shown(model)}

    def chart(title: str, unit: str, field: str) -> charts.Chart:
        return charts.Chart(title, unit, {
            model: [(p.at, getattr(p, field)) for p in points if getattr(p, field) is not None]
            for model, points in series.items()})

    recent = pairs(list(history.samples))
    last = {m: p for m, p in between(*recent[-1]).items() if shown(m)} if recent else {}
    ratio = merge_ratio(*recent[-1]) if recent else None
    first = history.samples[0]
    return {
        "off": False,
        "charts": [(f"{title} ({unit})", charts.svg(chart(title, unit, field))) for title, unit, field
                   in (("Requests per second", "req/s", "rps"), ("p50 latency", "ms", "p50_ms"),
                       ("p99 latency", "ms", "p99_ms"),
                       ("Errors per second", "err/s", "errors_per_s"))],
        "legend": [(model, charts.color(i)) for i, model in enumerate(sorted(series))],
        "last": sorted(last.items()),
        "ratio": ratio,
        "loads": sample.loads, "load_failures": sample.load_failures,
        "loads_since": sample.loads - first.loads if sample.loads >= first.loads else sample.loads,
        "samples": len(history.samples), "interval": history.interval_s,
    }


def metrics() -> Response:
    return page("metrics.html", **_figures())


def metrics_charts() -> Response:
    """The charts alone, for the page's refresh."""
    return page("metrics_charts.html", **_figures())
