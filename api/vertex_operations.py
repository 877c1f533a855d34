"""Vertex AI `google.longrunning.Operations` over HTTP, at the location and under each resource
(the paths google-cloud-aiplatform's REST transports map GetOperation & co. to),.

Routes, each under /v1/projects/{p}/locations/{l}{R} and /ui/projects/{p}/locations/{l}{R} with
{R} empty, /models/{m} or /endpoints/{e}:
  GET    {R}/operations                    ListOperations (filter, pageSize, pageToken)
  GET    {R}/operations/{op}               GetOperation
  POST   {R}/operations/{op}:wait          WaitOperation
  POST   {R}/operations/{op}:cancel        CancelOperation -> {}
  DELETE {R}/operations/{op}               DeleteOperation -> {}
(Every other path under a location answers 501: api/vertex_api.py.)

`projects/{p}/locations/{l}` itself (locations.get) and ml v1's Vizier studies stay with ml v1's
501 routes (api/unimplemented.py), which are registered after this blueprint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Response

from api._requests import use_id_converter
from api.vertex_common import blueprint, context, list_args, parent
from controlplane.vertex import operations
from web.google import google_json_response

bp = blueprint("vertex_operations")
use_id_converter(bp)
PREFIXES = ("/v1", "/ui")
RESOURCES = ("", "/models/<id:resource>", "/endpoints/<id:resource>")


def _parent(project: str, location: str, rule: str, resource: str | None) -> str:
    base = parent(project, location)
    if resource is None:
        return base
    kind = "models" if "/models/" in rule else "endpoints"
    return f"{base}/{kind}/{resource}"


def _view(method: Callable[..., dict[str, Any]], rule: str, named: bool) -> Callable[..., Response]:
    def view(project: str, location: str, resource: str | None = None,
             operation: str | None = None) -> Response:
        emu, caller = context()
        base = _parent(project, location, rule, resource)
        if not named:
            return google_json_response(method(emu, caller, base, **list_args()))
        return google_json_response(method(emu, caller, f"{base}/operations/{operation}"))
    return view


for _prefix in PREFIXES:
    for _resource in RESOURCES:
        _base = f"{_prefix}/projects/<project>/locations/<location>{_resource}/operations"
        _one = _base + "/<id:operation>"
        _key = f"{_prefix[1:]}{_resource.split('/')[1] if _resource else 'location'}"
        for _rule, _verb, _http, _method, _named in (
                (_base, "list", "GET", operations.list_operations, False),
                (_one, "get", "GET", operations.get_operation, True),
                (_one + ":wait", "wait", "POST", operations.wait_operation, True),
                (_one + ":cancel", "cancel", "POST", operations.cancel_operation, True),
                (_one, "delete", "DELETE", operations.delete_operation, True)):
            bp.add_url_rule(_rule, f"{_key}_{_verb}", _view(_method, _rule, _named),
                            methods=[_http])


