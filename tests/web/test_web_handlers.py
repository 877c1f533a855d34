"""web.handlers.register_error_renderer: an HTTPException raised inside a protocol blueprint's view
is answered in that protocol's shape with its own status (it used to recurse into the blueprint's
own catch-all handler until RecursionError, and end as a 500)."""

import logging

import pytest
from flask import Blueprint, Flask, abort

import api
from core.errors import ApiError
from web.handlers import register_error_renderer
from web.http import json_response


def _app() -> Flask:
    bp = Blueprint("proto", __name__)

    @bp.route("/proto/<int:status>")
    def fail(status: int):
        abort(status)

    @bp.route("/proto/boom")
    def boom():
        raise RuntimeError("/srv/secret/path.py exploded")

    def render(exc: ApiError):
        return json_response({"proto_error": exc.message, "code": exc.code.name}, exc.http_status)

    register_error_renderer(bp, render, logging.getLogger("test"))
    app = Flask("t")
    app.register_blueprint(bp)
    api.register_fallbacks(app)
    return app


@pytest.mark.parametrize("status", [400, 404, 405, 413, 415])
def test_http_exception_in_a_view_gets_the_protocols_shape_and_status(status):
    response = _app().test_client().get(f"/proto/{status}")
    assert response.status_code == status
    body = response.get_json()
    assert set(body) == {"proto_error", "code"}
    assert "Traceback" not in body["proto_error"]


def test_unexpected_exception_is_the_protocols_internal_error_without_details():
    response = _app().test_client().get("/proto/boom")
    assert response.status_code == 500
    assert response.get_json() == {"proto_error": "Internal error encountered.", "code": "INTERNAL"}


def test_requests_no_blueprint_took_still_get_the_app_fallback():
    response = _app().test_client().get("/elsewhere")
    assert response.status_code == 404
    assert "was not found" in response.get_json()["error"]
