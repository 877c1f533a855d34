"""A small client of the emulator controls (`/_mlemu/`) and the Vertex AI list calls, for the
console's pages.

Both are served by other parts of mlemu, which a build may lack: a 404 (or 501) from the route
itself means "not available in this build", which the pages say plainly rather than failing.
The control paths and bodies are the controls' documented interface (reset, snapshot, faults,
timing, requests); Vertex AI's lists are `projects.locations.models.list` and
`projects.locations.endpoints.list` (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/
projects.locations.models/list, .../projects.locations.endpoints/list).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from typing import Any

from console.loopback import Answer, WsgiApp, call

CONTROLS = "/_mlemu"
#: Statuses with which a build without the route answers (unknown path; unimplemented method).
_ABSENT = (404, 501)


@dataclasses.dataclass(frozen=True)
class Listing:
    """What a list call gave: `available` False when the build has no such route."""

    available: bool
    items: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    error: str = ""


def error_text(answer: Answer) -> str:
    """The message of an error answer, whichever of mlemu's error shapes it has."""
    body = answer.json()
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)
        if error:
            return str(error)
    return f"HTTP {answer.status}"


def _first_list(body: Any, key: str) -> list[dict[str, Any]]:
    """`body[key]`; else the only list in the body (a documented shape, or a close variant)."""
    if isinstance(body, list):
        return [x for x in body if isinstance(x, dict)]
    if not isinstance(body, dict):
        return []
    found = body.get(key)
    if not isinstance(found, list):
        found = next((v for v in body.values() if isinstance(v, list)), [])
    return [x for x in found if isinstance(x, dict)]


def _listing(answer: Answer, key: str) -> Listing:
    if answer.status in _ABSENT and _route_missing(answer):
        return Listing(False)
    if not answer.ok:
        return Listing(True, error=error_text(answer))
    return Listing(True, _first_list(answer.json(), key))


def _route_missing(answer: Answer) -> bool:
    """A 404 for the route itself, not for a resource the route looked up (a Google error
    object names one with NOT_FOUND and a resource message; an unknown path says 'URL')."""
    if answer.status == 501:
        return True
    text = error_text(answer)
    return "URL" in text or "not found on this server" in text.lower()


_VERTEX_LIST = re.compile(r"/v1/projects/<[^>]+>/locations/<[^>]+>/(models|endpoints)")


class ControlsClient:
    """The controls and Vertex AI lists, called with one console user's credentials.

    `routes` are the app's URL rules: a Vertex AI list the app has no rule for is not asked
    (the request would only add a 404 to the request journal at every overview)."""

    def __init__(self, app: WsgiApp, headers: dict[str, str], routes: Iterable[str] = ()) -> None:
        self._app = app
        self._headers = headers
        self._vertex = {m.group(1) for rule in routes if (m := _VERTEX_LIST.fullmatch(rule))}

    def _call(self, method: str, path: str, body: Any = None, *,
              query: dict[str, str] | None = None, raw: bytes | None = None,
              content_type: str = "application/json") -> Answer:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        return call(self._app, method, path, headers=self._headers, query=query, body=data,
                    content_type=content_type)

    # --- faults ---------------------------------------------------------------------------
    def faults(self) -> Listing:
        return _listing(self._call("GET", f"{CONTROLS}/faults"), "faults")

    def add_fault(self, rule: dict[str, Any]) -> Answer:
        return self._call("POST", f"{CONTROLS}/faults", rule)

    def remove_fault(self, fault_id: str) -> Answer:
        return self._call("DELETE", f"{CONTROLS}/faults/{fault_id}")

    def clear_faults(self) -> Answer:
        return self._call("DELETE", f"{CONTROLS}/faults")

    # --- timing ---------------------------------------------------------------------------
    def timing(self) -> Listing:
        return _listing(self._call("GET", f"{CONTROLS}/timing"), "timing")

    def put_timing(self, rule: dict[str, Any]) -> Answer:
        return self._call("PUT", f"{CONTROLS}/timing", rule)

    def clear_timing(self) -> Answer:
        return self._call("DELETE", f"{CONTROLS}/timing")

    # --- reset and snapshots --------------------------------------------------------------
    def reset(self, project: str | None) -> Answer:
        return self._call("POST", f"{CONTROLS}/reset", {"project": project} if project else {})

    def export_snapshot(self) -> Answer:
        return self._call("GET", f"{CONTROLS}/snapshot")

    def import_snapshot(self, archive: bytes) -> Answer:
        return self._call("POST", f"{CONTROLS}/snapshot", raw=archive,
                          content_type="application/gzip")

    # --- the request journal --------------------------------------------------------------
    def requests(self, filters: dict[str, str]) -> Listing:
        query = {k: v for k, v in filters.items() if v}
        return _listing(self._call("GET", f"{CONTROLS}/requests", query=query), "requests")

    def clear_requests(self) -> Answer:
        return self._call("DELETE", f"{CONTROLS}/requests")

    # --- Vertex AI ------------------------------------------------------------------------
    def vertex(self, project: str, location: str, collection: str) -> Listing:
        """`models` or `endpoints` of a Vertex AI location (first page of 100)."""
        if collection not in self._vertex:
            return Listing(False)
        answer = self._call("GET", f"/v1/projects/{project}/locations/{location}/{collection}",
                            query={"pageSize": "100"})
        return _listing(answer, collection)  # an unknown location: its error, shown as such
