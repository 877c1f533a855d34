"""The console's Controls and Requests pages, over the emulator controls' HTTP interface
(`/_mlemu/`: faults, timing, reset, snapshot export/import, the request journal) through
console/controls_client.py. A build without the controls shows a notice instead.

Every form here changes state: each checks the CSRF token first, then sends what the user
entered as the controls' JSON; the controls validate it and their answer (or error) is shown.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Response, request

from console import session
from console.controls_client import error_text
from console.loopback import Answer
from console.web import controls, page, visitor
from core.errors import InvalidArgument

#: The journal's filters (the controls' query parameters).
REQUEST_FILTERS = ("protocol", "method", "project", "model", "version", "status", "since")
PROTOCOLS = ("", "aiplatform", "vertex", "tfserving", "v2", "grps")
#: Largest snapshot archive the import form takes.
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024


def _controls_page(message: str = "", failed: bool = False, status: int = 200) -> Response:
    client = controls()
    return page("controls.html", faults=client.faults(), timing=client.timing(),
                protocols=PROTOCOLS, message=message, failed=failed, status=status)


def _outcome(answer: Answer, done: str) -> Response:
    if answer.ok:
        return _controls_page(done)
    if answer.status == 404 and "URL" in error_text(answer):
        return _controls_page("The emulator controls are not available in this build.", True, 404)
    return _controls_page(f"Refused ({answer.status}): {error_text(answer)}", True, answer.status)


def controls_index() -> Response:
    visitor()
    return _controls_page()


def _number(field: str, kind: type, low: float, high: float) -> Any:
    text = request.form.get(field, "").strip()
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise InvalidArgument(f"{field} must be a number.") from None
    if not low <= value <= high:
        raise InvalidArgument(f"{field} must be between {low:g} and {high:g}.")
    return value


def fault_rule() -> dict[str, Any]:
    """The fault rule the add form describes (fields left empty are left out)."""
    form = request.form
    match = {key: form.get(key, "").strip() for key in ("protocol", "method", "project", "model",
                                                          "version")}
    rule: dict[str, Any] = {"match": {k: v for k, v in match.items() if v}}
    code = _number("code", int, 100, 599)
    if code is not None:
        error = {"code": code, "status": form.get("status", "").strip(),
                 "message": form.get("message", "").strip()}
        rule["error"] = {k: v for k, v in error.items() if v != ""}
    for field, kind, low, high in (("delayMs", int, 0, 600_000), ("probability", float, 0, 1),
                                   ("seed", int, 0, 2**31), ("times", int, 1, 10**9)):
        value = _number(field, kind, low, high)
        if value is not None:
            rule[field] = value
    if "error" not in rule and "delayMs" not in rule:
        raise InvalidArgument("A fault needs an error code or a delay.")
    return rule


def add_fault() -> Response:
    session.check_csrf(request)
    visitor()
    return _outcome(controls().add_fault(fault_rule()), "Fault rule added.")


def remove_fault(fault_id: str) -> Response:
    session.check_csrf(request)
    visitor()
    return _outcome(controls().remove_fault(fault_id), "Fault rule removed.")


def clear_faults() -> Response:
    session.check_csrf(request)
    visitor()
    return _outcome(controls().clear_faults(), "Every fault rule removed.")


def set_timing() -> Response:
    session.check_csrf(request)
    visitor()
    form = request.form
    kind = form.get("after", "seconds")
    if kind not in ("seconds", "polls"):
        raise InvalidArgument("after is seconds or polls.")
    amount = _number("amount", float if kind == "seconds" else int, 0, 86_400)
    rule: dict[str, Any] = {"operationType": form.get("operationType", "").strip(),
                            "after": {kind: amount if amount is not None else 0}}
    code = _number("failCode", int, 1, 16)
    if code is not None:
        rule["fail"] = {"code": code, "message": form.get("failMessage", "").strip()}
    return _outcome(controls().put_timing(rule), "Operation timing set.")


def clear_timing() -> Response:
    session.check_csrf(request)
    visitor()
    return _outcome(controls().clear_timing(), "Operation timing cleared.")


def reset() -> Response:
    session.check_csrf(request)
    visitor()
    project = request.form.get("project", "").strip() or None
    return _outcome(controls().reset(project), f"Reset {'project ' + project if project else 'everything'}.")


def export_snapshot() -> Response:
    visitor()
    answer = controls().export_snapshot()
    if not answer.ok:
        return _outcome(answer, "")
    return Response(answer.body, 200, content_type=answer.content_type or "application/gzip",
                    headers={"Content-Disposition": 'attachment; filename="mlemu-snapshot.tar.gz"',
                             "Cache-Control": "no-store"})


def import_snapshot() -> Response:
    session.check_csrf(request)
    visitor()
    upload = request.files.get("archive")
    if upload is None or not upload.filename:
        raise InvalidArgument("Choose a snapshot archive to import.")
    archive = upload.stream.read(MAX_SNAPSHOT_BYTES + 1)
    if len(archive) > MAX_SNAPSHOT_BYTES:
        raise InvalidArgument(f"A snapshot archive holds at most {MAX_SNAPSHOT_BYTES} bytes.")
    return _outcome(controls().import_snapshot(archive), "Snapshot imported.")


def journal() -> Response:
    visitor()
    filters = {key: request.args.get(key, "").strip() for key in REQUEST_FILTERS}
    listing = controls().requests(filters)
    entries = [(entry, json.dumps(entry, indent=2)) for entry in reversed(listing.items)]
    return page("requests.html", listing=listing, entries=entries, filters=filters,
                protocols=PROTOCOLS)


def clear_journal() -> Response:
    session.check_csrf(request)
    visitor()
    answer = controls().clear_requests()
    if not answer.ok:
        return _outcome(answer, "")
    return journal()
