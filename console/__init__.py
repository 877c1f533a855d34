"""mlemu's web console: server-rendered pages (Jinja2 templates and a little vanilla JavaScript,
all shipped in this package; nothing is fetched from the internet) that show and drive the
emulator. docs/console.md is the user's guide.

Routes (all under /console/; MLEMU_CONSOLE=false leaves them unregistered, so they answer 404):
  GET  /console/                                     overview: projects, models and versions,
                                                     Vertex AI models and endpoints, batch jobs,
                                                     operations, loaded models and memory
  GET  /console/projects/P/models/M                  a model and its versions
  GET  /console/projects/P/models/M/versions/V       a version; POST .../try: "try it"
  GET  /console/projects/P/locations/L/endpoints/E   a Vertex AI endpoint; POST .../try: "try it"
  GET  /console/metrics (+ /metrics/charts)          metrics at a glance
  GET  /console/requests (POST /requests/clear)      the request journal
  GET  /console/controls (+ POST forms)              faults, timing, reset, snapshot export/import
  GET, POST /console/login; POST /console/logout     the credential kept when IAM is enforced
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, redirect, request, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as WResponse

from console import control_pages, endpoint_pages, metrics_page, pages, session
from console.web import STATE_KEY, ConsoleState, page
from core.errors import ApiError

PREFIX = "/console"
_VERSION = "/projects/<project>/models/<model_id>/versions/<version_id>"
_ENDPOINT = "/projects/<project>/locations/<location>/endpoints/<endpoint_id>"
_ROUTES = (
    ("/", "index", pages.index, ("GET",)),
    ("/login", "login", pages.login, ("GET", "POST")),
    ("/logout", "logout", pages.logout, ("POST",)),
    ("/projects/<project>/models/<model_id>", "model", pages.model, ("GET",)),
    (_VERSION, "version", pages.version, ("GET",)),
    (_VERSION + "/try", "try_version", pages.try_version, ("POST",)),
    (_ENDPOINT, "endpoint", endpoint_pages.endpoint, ("GET",)),
    (_ENDPOINT + "/try", "try_endpoint", endpoint_pages.try_endpoint, ("POST",)),
    ("/metrics", "metrics", metrics_page.metrics, ("GET",)),
    ("/metrics/charts", "metrics_charts", metrics_page.metrics_charts, ("GET",)),
    ("/requests", "requests", control_pages.journal, ("GET",)),
    ("/requests/clear", "clear_requests", control_pages.clear_journal, ("POST",)),
    ("/controls", "controls", control_pages.controls_index, ("GET",)),
    ("/controls/faults", "add_fault", control_pages.add_fault, ("POST",)),
    ("/controls/faults/<fault_id>/remove", "remove_fault", control_pages.remove_fault, ("POST",)),
    ("/controls/faults/clear", "clear_faults", control_pages.clear_faults, ("POST",)),
    ("/controls/timing", "set_timing", control_pages.set_timing, ("POST",)),
    ("/controls/timing/clear", "clear_timing", control_pages.clear_timing, ("POST",)),
    ("/controls/reset", "reset", control_pages.reset, ("POST",)),
    ("/controls/snapshot", "export_snapshot", control_pages.export_snapshot, ("GET",)),
    ("/controls/snapshot/import", "import_snapshot", control_pages.import_snapshot, ("POST",)),
)


def make_blueprint() -> Blueprint:
    bp = Blueprint("console", __name__, url_prefix=PREFIX, template_folder="templates",
                   static_folder="static")
    for path, endpoint, view, methods in _ROUTES:
        bp.add_url_rule(path, endpoint, view, methods=list(methods))

    @bp.before_request
    def _bound_body() -> None:
        # A form is small; only the snapshot import carries a file. Werkzeug refuses more (413).
        limit = control_pages.MAX_SNAPSHOT_BYTES if request.endpoint == "console.import_snapshot" \
            else 1024 * 1024
        request.max_content_length = limit

    @bp.errorhandler(session.SignInNeeded)
    def _sign_in(exc: session.SignInNeeded) -> WResponse:
        return redirect(url_for("console.login", expired="1" if exc.reason else None), 303)

    @bp.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> Response:
        return page("error.html", status=exc.http_status, message=exc.message, code=exc.code.name)

    @bp.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:  # e.g. 413 for a body over the bound
        return page("error.html", status=exc.code or 500, message=exc.description or "",
                    code=exc.name)

    return bp


def register(app: Flask) -> None:
    """Serve the console from `app` unless its emulator's settings turn it off."""
    if not app.extensions["mlemu"].settings.console:
        return
    app.extensions[STATE_KEY] = ConsoleState()
    app.register_blueprint(make_blueprint())
