"""Prometheus scrape endpoint and grps's monitoring page.

  GET /metrics  Prometheus text format (OpenMetrics when asked for), every process's metrics
                merged (observability/exposition.py). Open when IAM is off; when IAM is enforced
                it answers 403 unless MLEMU_METRICS_PUBLIC=on (scrapers send no credentials).
  GET /         grps's monitor at the server root (NetEase-Media/grps docs/10_Monitor.md): its
                figures (qps, latency, fail rate, CPU, memory) from the same metrics.
Both answer 404 when metrics are off (MLEMU_METRICS=off).
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, request

from core.errors import NotFound, PermissionDenied
from observability import exposition
from observability.metrics import Instruments

bp = Blueprint("metrics", __name__)


def _instruments() -> Instruments:
    """This emulator's instruments, once the route is known to be open to this request."""
    emu = current_app.extensions["mlemu"]
    if emu.instruments is None:
        raise NotFound(f"The requested URL {request.path} was not found on this server "
                       "(metrics are off: MLEMU_METRICS=false).")
    if emu.settings.iam_mode == "enforce" and not emu.settings.metrics_public:
        raise PermissionDenied("Metrics are not public while IAM is enforced; set "
                               "MLEMU_METRICS_PUBLIC=true to let scrapers read /metrics.")
    instruments: Instruments = emu.instruments
    return instruments


@bp.get("/metrics")
def metrics() -> Response:
    body, content_type = exposition.render(_instruments(), request.headers.get("Accept"))
    return Response(body, 200, content_type=content_type)


@bp.get("/")
def grps_monitor() -> Response:
    page = exposition.grps_page(_instruments(), current_app.extensions["mlemu"].started_at)
    return Response(page, 200,
                    content_type="text/html; charset=utf-8")
