"""The ml v1 surface as Google's discovery document describes it: method ids, HTTP methods, paths,
and the field names of the request schemas the management API validates.

The data is `registry/ml_v1.json`, a subset generated from the discovery document that ships
inside google-api-python-client (`googleapiclient/discovery_cache/documents/ml.v1.json`) by
`tools/ml_v1_discovery.py`; a test checks it is current. It is committed so the server does not
need the client library at run time.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).with_name("ml_v1.json")


@dataclasses.dataclass(frozen=True)
class Method:
    id: str  # e.g. "ml.projects.models.versions.create"
    http_method: str
    flat_path: str  # e.g. "v1/projects/{projectsId}/models/{modelsId}/versions"
    path: str  # e.g. "v1/{+parent}/versions"


@functools.cache
def _snapshot() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SNAPSHOT.read_text())
    return data


def methods() -> list[Method]:
    return [Method(m["id"], m["httpMethod"], m["flatPath"], m["path"]) for m in _snapshot()["methods"]]


def fields(schema: str) -> dict[str, str]:
    """A schema's JSON field names -> JSON types ("string", "boolean", "array", "object", ...),
    e.g. fields("GoogleCloudMlV1__Model")."""
    return dict(_snapshot()["schemas"][schema])


def revision() -> str:
    return str(_snapshot()["revision"])
