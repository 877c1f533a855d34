"""The emulator's own controls over HTTP, under /_mlemu/ (never a Google path; docs/controls.md).

Routes:
  POST   /_mlemu/reset                   {} or {"project": P} -> {}
  GET    /_mlemu/snapshot                the state as a gzip archive
  POST   /_mlemu/snapshot                restore an archive (the body) -> {}
  POST   /_mlemu/faults                  add a fault rule -> the rule with its id
  GET    /_mlemu/faults                  {"faults": [rule + hits]}
  DELETE /_mlemu/faults[/{id}]           every rule, or one
  PUT    /_mlemu/timing                  set an operation type's timing rule
  GET    /_mlemu/timing                  {"timing": [rule]}
  DELETE /_mlemu/timing[?operationType=] every timing rule, or one type's
  GET    /_mlemu/requests?FILTERS        {"requests": [entry]}, oldest first
  DELETE /_mlemu/requests                empty the journal
  GET|PUT /_mlemu/requests/settings      whether (and how much of) bodies are recorded

Errors are the Google error object, as on the ml v1 surface.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, request

from admin import controls, reset, snapshot
from api._requests import body, context
from web.google import google_error_response
from web.handlers import register_error_renderer
from web.http import json_response, read_body

log = logging.getLogger("mlemu.admin")
bp = Blueprint("mlemu_admin", __name__, url_prefix="/_mlemu")
register_error_renderer(bp, google_error_response, log)


@bp.post("/reset")
def post_reset() -> Response:
    emu, caller = context()
    return json_response(reset.reset(emu, caller, body(required=False)))


@bp.get("/snapshot")
def get_snapshot() -> Response:
    emu, caller = context()
    data = snapshot.export_snapshot(emu, caller)
    return Response(data, mimetype="application/gzip", headers={
        "Content-Disposition": 'attachment; filename="mlemu-snapshot.tar.gz"'})


@bp.post("/snapshot")
def post_snapshot() -> Response:
    emu, caller = context()
    snapshot.authorize(emu, caller)  # before the (large) body is read
    data = read_body(snapshot.MAX_ARCHIVE_BYTES)
    return json_response(snapshot.import_snapshot(emu, caller, data))


@bp.post("/faults")
def post_fault() -> Response:
    emu, caller = context()
    return json_response(controls.add_fault(emu, caller, body()))


@bp.get("/faults")
def get_faults() -> Response:
    emu, caller = context()
    return json_response(controls.list_faults(emu, caller))


@bp.delete("/faults")
@bp.delete("/faults/<rule_id>")
def delete_faults(rule_id: str | None = None) -> Response:
    emu, caller = context()
    return json_response(controls.delete_fault(emu, caller, rule_id))


@bp.put("/timing")
def put_timing() -> Response:
    emu, caller = context()
    return json_response(controls.put_timing(emu, caller, body()))


@bp.get("/timing")
def get_timing() -> Response:
    emu, caller = context()
    return json_response(controls.list_timing(emu, caller))


@bp.delete("/timing")
def delete_timing() -> Response:
    emu, caller = context()
    return json_response(controls.clear_timing(emu, caller, request.args.get("operationType")))


@bp.get("/requests")
def get_requests() -> Response:
    emu, caller = context()
    return json_response(controls.list_requests(emu, caller, request.args.to_dict()))


@bp.delete("/requests")
def delete_requests() -> Response:
    emu, caller = context()
    return json_response(controls.clear_requests(emu, caller))


@bp.get("/requests/settings")
def get_journal_settings() -> Response:
    emu, caller = context()
    return json_response(controls.journal_settings(emu, caller))


@bp.put("/requests/settings")
def put_journal_settings() -> Response:
    emu, caller = context()
    return json_response(controls.journal_settings(emu, caller, body()))
