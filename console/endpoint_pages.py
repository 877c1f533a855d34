"""A Vertex AI endpoint's page: its resource, deployed models and traffic split, and "try it"
(`:predict` / `:explain` on the endpoint, with the Vertex AI SDK's call to copy).

The endpoint is read through the Vertex AI API (`GET /v1/projects/P/locations/L/endpoints/E`,
google/cloud/aiplatform/v1/endpoint_service.proto), with the visitor's credentials; a build
without that API answers 404 and the page says so.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Response

from console import overview, snippets, tryit
from console.controls_client import error_text
from console.web import api, page, visitor
from core.errors import Code, InvalidArgument, NotFound, from_code


def _endpoint(project: str, location: str, endpoint_id: str) -> dict[str, Any]:
    for value in (project, location, endpoint_id):
        if not overview.valid_project(value):
            raise InvalidArgument("Project, location and endpoint are ids: letters, digits, "
                                  "'.', ':', '-', '_'.")
    visitor()
    answer = api("GET", f"/v1/projects/{project}/locations/{location}/endpoints/{endpoint_id}")
    found = answer.json()
    if answer.status == 404 and "URL" in error_text(answer):
        raise NotFound("The Vertex AI API is not available in this build.")
    if not answer.ok or not isinstance(found, dict):
        raise from_code(_code(found), error_text(answer), http_status=answer.status)
    return found


def _code(body: Any) -> Code:
    """The canonical code of a Google error object (UNKNOWN when there is none)."""
    error = body.get("error") if isinstance(body, dict) else None
    status = error.get("status") if isinstance(error, dict) else None
    return Code[status] if isinstance(status, str) and status in Code.__members__ else Code.UNKNOWN


def endpoint(project: str, location: str, endpoint_id: str) -> Response:
    return _page(project, location, endpoint_id, None)


def try_endpoint(project: str, location: str, endpoint_id: str) -> Response:
    name = f"projects/{project}/locations/{location}/endpoints/{endpoint_id}"
    return _page(project, location, endpoint_id, tryit.send(name, snippets.vertex_python))


def _page(project: str, location: str, endpoint_id: str,
          result: dict[str, Any] | None) -> Response:
    found = _endpoint(project, location, endpoint_id)
    text = result["text"] if result else json.dumps({"instances": []})
    return page("endpoint.html", project=project, location=location, endpoint_id=endpoint_id,
                endpoint=found, resource=json.dumps(found, indent=2), result=result,
                body_text=text, method=result["method"] if result else "predict")
