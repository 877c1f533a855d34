"""Health probes (open in every IAM mode): liveness and readiness for Cloud Run / Kubernetes.

  GET /healthz  -> 200 {"status": "ok", "pid": <worker pid>} while the process serves
  GET /readyz   -> 200 {"status": "ready"} once the bootstrap models are loaded, else 503
"""

from __future__ import annotations

import os

from flask import Blueprint, Response, current_app

from web.http import json_response

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    return json_response({"status": "ok", "pid": os.getpid()})


@bp.get("/readyz")
def readyz() -> Response:
    emu = current_app.extensions["mlemu"]
    if emu.is_ready():
        return json_response({"status": "ready"})
    return json_response({"status": "loading"}, 503)
