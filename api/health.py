"""Health probes (open in every IAM mode): liveness and readiness for Cloud Run / Kubernetes.

  GET /healthz  -> 200 {"status": "ok", "pid": <worker pid>, "project": <default project>} while
                   the process serves (the CLI reads `project` when given none)
  GET /readyz   -> 200 {"status": "ready"} once the bootstrap models are loaded and the store is
                   usable; 200 {"status": "degraded", "problems": [...]} when predictions are
                   served but something is not (a full state disk: changes answer 503; metrics
                   held in memory), so a load balancer keeps sending predictions; else 503
                   {"status": "loading"} or {"status": "unavailable", "error"}
"""

from __future__ import annotations

import os

from flask import Blueprint, Response, current_app

from web.http import json_response

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    emu = current_app.extensions["mlemu"]
    return json_response({"status": "ok", "pid": os.getpid(),
                          "project": emu.settings.default_project})


@bp.get("/readyz")
def readyz() -> Response:
    emu = current_app.extensions["mlemu"]
    problem = emu.store_problem()
    if problem is not None:
        return json_response({"status": "unavailable", "error": problem}, 503)
    if emu.warmed.is_set():
        problems = emu.degraded()
        if problems:
            return json_response({"status": "degraded", "problems": problems})
        return json_response({"status": "ready"})
    return json_response({"status": "loading"}, 503)
