"""Request plumbing shared by the Vertex AI management blueprints (api/vertex_*.py): resource
names from the path, bodies, list arguments, the Google error object for every error, and the
501 UNIMPLEMENTED answer for Vertex AI methods mlemu does not serve.

Vertex AI's REST surface lives at `/v1/projects/{p}/locations/{l}/...`; the SDK's operations
client also polls `/ui/projects/...` (google-cloud-aiplatform's REST transports list `/ui/` URIs
first in their `google.longrunning.Operations` http options), so operations answer there too.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from flask import Blueprint, current_app, request

from api._requests import int_arg
from core.errors import Unimplemented
from core.payloads import Caller
from registry import vertex_resources as vr
from web.google import google_error_response
from web.handlers import register_error_renderer
from web.http import decode_json, read_body, request_caller

log = logging.getLogger("mlemu.vertex")
LOCATION = "/v1/projects/<project>/locations/<location>"


def blueprint(name: str) -> Blueprint:
    bp = Blueprint(name, __name__)
    register_error_renderer(bp, google_error_response, log)
    return bp


def context() -> tuple[Any, Caller]:
    return current_app.extensions["mlemu"], request_caller()


def parent(project: str, location: str) -> str:
    return vr.location_name(project, location)


def body(required: bool = True) -> Any:
    emu = current_app.extensions["mlemu"]
    data = read_body(emu.settings.max_request_bytes)
    if not data.strip() and not required:
        return {}
    return decode_json(data)


def list_args() -> dict[str, Any]:
    return {"filter": request.args.get("filter"), "page_size": int_arg("pageSize"),
            "page_token": request.args.get("pageToken"), "order_by": request.args.get("orderBy")}


def unimplemented(project: str = "", location: str = "", rest: str = "") -> NoReturn:
    """A Vertex AI method mlemu does not serve (docs/vertex.md lists what it serves)."""
    from auth import require_authenticated

    require_authenticated(current_app.extensions["mlemu"], request_caller())
    raise Unimplemented(
        f"{request.method} {request.path} is a Vertex AI method mlemu does not implement; "
        "docs/vertex.md lists the methods it serves.")
