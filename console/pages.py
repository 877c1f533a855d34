"""The console's read pages: overview, a model, a version with its "try it" form, sign-in.

Each view gathers through console/overview.py (the use cases, with the visitor's credentials,
decide what a user may see; figures labelled by model id only are filtered by
`overview.visible_models`) and renders a template.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from flask import Response, redirect, request, url_for
from werkzeug.wrappers import Response as WResponse

from console import overview, session, snippets, tryit
from console.metrics_data import Sample
from console.web import controls, emulator, metrics_sample, page, visitor
from core.errors import ApiError, InvalidArgument
from core.payloads import Caller

if TYPE_CHECKING:
    from emulator import Emulator

#: Where Vertex AI resources are listed unless the page asks for another location.
DEFAULT_LOCATION = "us-central1"


def index() -> Response:
    emu, who = emulator(), visitor()
    project = request.args.get("project") or emu.settings.default_project
    location = request.args.get("location") or DEFAULT_LOCATION
    if not overview.valid_project(project) or not overview.valid_project(location):
        raise InvalidArgument("Project and location are ids: letters, digits, '.', ':', '-', '_'.")
    client = controls()
    sample = metrics_sample()
    return page(
        "overview.html", project=project, location=location,
        projects=overview.known_projects(emu, project),
        models=overview.models_with_versions(emu, who.caller, project),
        jobs=overview.batch_jobs(emu, who.caller, project),
        operations=overview.recent_operations(emu, who.caller, project),
        vertex_models=client.vertex(project, location, "models"),
        vertex_endpoints=client.vertex(project, location, "endpoints"),
        loaded=_loaded(emu, who.caller, project, sample),
        memory=sorted(sample.memory.items()) if sample else [("", _own_memory())])


def _loaded(emu: Emulator, caller: Caller, project: str,
            sample: Sample | None) -> list[tuple[str, float]]:
    """Loaded versions ("model/version", processes holding it) the visitor may know of."""
    found = sorted(sample.loaded.items()) if sample else [
        ("/".join(name.split("/")[3::2]), 1.0) for name in overview.loaded_here(emu)]
    visible = overview.visible_models(emu, caller, project)
    return [(name, count) for name, count in found
            if visible is None or name.split("/", 1)[0] in visible]


def _own_memory() -> float:
    """This process's resident memory in bytes (when metrics, which publish it, are off)."""
    try:
        with open("/proc/self/statm") as statm:
            return float(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        return 0.0


def model(project: str, model_id: str) -> Response:
    found = overview.model_page(emulator(), visitor().caller, project, model_id)
    return page("model.html", project=project, model=found)


def version(project: str, model_id: str, version_id: str) -> Response:
    return _version_page(project, model_id, version_id, None)


def try_version(project: str, model_id: str, version_id: str) -> Response:
    name = f"projects/{project}/models/{model_id}/versions/{version_id}"
    return _version_page(project, model_id, version_id, tryit.send(name, snippets.python))


def _version_page(project: str, model_id: str, version_id: str,
                  result: dict[str, Any] | None) -> Response:
    found = overview.version_page(emulator(), visitor().caller, project, model_id, version_id)
    predictor = emulator().deployments.loaded().get(found["name"])
    signature = predictor.signature() if predictor is not None else None
    text = result["text"] if result else snippets.example_body(signature)
    return page("version.html", project=project, model_id=model_id, version=found,
                resource=json.dumps(found, indent=2), loaded=predictor is not None,
                signature=signature, result=result,
                body_text=text, method=result["method"] if result else "predict")


def login() -> WResponse:
    if request.method == "GET":
        # A fixed sentence, never text from the query string (a link could not make this page
        # say something else).
        expired = request.args.get("expired") == "1"
        return page("login.html", reason="Your credential is no longer accepted (expired or "
                    "revoked): sign in again." if expired else "")
    session.check_csrf(request)
    token = request.form.get("token", "").strip()
    if token.lower().startswith("bearer "):
        token = token[7:].strip()
    reason = ""
    if not token or len(token) > session.MAX_TOKEN_CHARS:
        reason = "Give a token of at most 3800 characters."
    else:
        try:
            session.verify_token(token)
        except ApiError as exc:  # the page says why, as the API would
            reason = exc.message
    if reason:
        return page("login.html", status=401, reason=reason)
    response = redirect(url_for("console.index"), 303)
    session.sign_in(response, request, token)
    return response


def logout() -> WResponse:
    session.check_csrf(request)
    response = redirect(url_for("console.login"), 303)
    session.sign_out(response, request)
    return response
