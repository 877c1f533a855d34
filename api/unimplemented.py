"""501 UNIMPLEMENTED, in the Google error format, for every ml v1 method no blueprint serves.

The routes are generated from the discovery document (registry/discovery.py) when the app is
built, after every real blueprint is registered: a method counts as implemented when a request
to its path already reaches another view. `coverage(app)` reports the outcome; docs/management.md's method
coverage table is generated from it by tools/ml_v1_discovery.py.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, NoReturn

from flask import Flask, current_app
from werkzeug.exceptions import HTTPException
from werkzeug.routing import RequestRedirect

import auth
from core.errors import Unimplemented
from registry import discovery
from web.http import request_caller

ENDPOINT_PREFIX = "ml_v1_unimplemented"
#: predict and explain take any model or version name ({+name}), but their flatPath names only
#: the project; these are the paths clients actually send.
NAME_PATHS = {
    method: [f"v1/projects/{{projectsId}}/models/{{modelsId}}:{verb}",
             f"v1/projects/{{projectsId}}/models/{{modelsId}}/versions/{{versionsId}}:{verb}"]
    for method, verb in (("ml.projects.predict", "predict"), ("ml.projects.explain", "explain"))
}


@dataclasses.dataclass(frozen=True)
class Coverage:
    method: discovery.Method
    implemented: bool
    #: The path is Vertex AI's (docs/vertex.md): its operations under projects/*/locations/*.
    vertex: bool = False


def _rule(path: str) -> str:
    return "/" + re.sub(r"\{(\w+)\}", r"<\1>", path)


def _sample(path: str) -> str:
    return "/" + re.sub(r"\{\w+\}", "x", path)


def _endpoint(app: Flask, path: str, http_method: str) -> str | None:
    """The view a request to `path` reaches now (None: none)."""
    adapter = app.url_map.bind("localhost")
    try:
        endpoint, _ = adapter.match(_sample(path), method=http_method)
    except (HTTPException, RequestRedirect):
        return None
    return str(endpoint)


def _served(app: Flask, path: str, http_method: str) -> bool:
    endpoint = _endpoint(app, path, http_method)
    return endpoint is not None and not endpoint.startswith(ENDPOINT_PREFIX)


def _unimplemented_view(method_id: str) -> Any:
    def view(**_: str) -> NoReturn:
        # As at Google's front end, a caller is authenticated before the method is looked at.
        auth.require_authenticated(current_app.extensions["mlemu"], request_caller())
        raise Unimplemented(f"Method {method_id} is not implemented by mlemu.")

    return view


def register_unimplemented(app: Flask) -> None:
    """Add a 501 route for each unserved ml v1 method; call after all other blueprints."""
    rows = []
    for method in discovery.methods():
        paths = NAME_PATHS.get(method.id, [method.flat_path])
        missing = [p for p in paths if not _served(app, p, method.http_method)]
        for i, path in enumerate(missing):
            app.add_url_rule(_rule(path), endpoint=f"{ENDPOINT_PREFIX}.{method.id}.{i}",
                             view_func=_unimplemented_view(method.id),
                             methods=[method.http_method])
        served = [_endpoint(app, p, method.http_method) or "" for p in paths if p not in missing]
        rows.append(Coverage(method, implemented=not missing,
                             vertex=bool(served) and all(e.startswith("vertex_") for e in served)))
    app.extensions["mlemu_ml_v1_coverage"] = rows


def coverage(app: Flask) -> list[Coverage]:
    return list(app.extensions["mlemu_ml_v1_coverage"])
