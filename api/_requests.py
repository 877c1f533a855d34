"""Request decoding shared by the ml v1 management blueprints: the emulator and caller, JSON
bodies, typed query parameters, and the `id` URL converter.

Resource ids never contain ':' (names.ID_RE), so the `id` converter keeps `/models/<id:model>`
from swallowing custom-method paths such as `/models/m:getIamPolicy`; those reach their own
route (or the 501 fallback) instead.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, request
from flask.blueprints import BlueprintSetupState
from werkzeug.routing import BaseConverter

import auth
from core.errors import InvalidArgument
from core.payloads import Caller
from web.google import check_standard_params
from web.http import decode_json, read_body, request_caller


class IdConverter(BaseConverter):
    regex = r"[^/:]+"


def use_id_converter(bp: Blueprint) -> None:
    """Make `<id:...>` available to `bp`'s rules (call before declaring them)."""
    def register(state: BlueprintSetupState) -> None:
        state.app.url_map.converters.setdefault("id", IdConverter)

    bp.record_once(register)


def context() -> tuple[Any, Caller]:
    """The Emulator and the verified caller of the current request."""
    check_standard_params()
    return current_app.extensions["mlemu"], request_caller()


def body(required: bool = True) -> Any:
    """The request's JSON body, read only once the caller is known: in IAM mode `enforce` an
    anonymous caller is refused (401) before a byte is decoded, unless a policy of the path's
    project grants `allUsers` something, as the predict routes refuse before the body."""
    emu = current_app.extensions["mlemu"]
    project = (request.view_args or {}).get("project") or emu.settings.default_project
    auth.require_identity_unless_public(emu, request_caller(), f"projects/{project}")
    data = read_body(emu.settings.max_request_bytes)
    if not data.strip() and not required:
        return None
    return decode_json(data)


def int_arg(name: str) -> int | None:
    raw = request.args.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument(f"Invalid value at '{name}' (TYPE_INT32), \"{raw}\"") from None


def bool_arg(name: str) -> bool:
    raw = (request.args.get(name) or "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise InvalidArgument(f"Invalid value at '{name}' (TYPE_BOOL), \"{raw}\"")
    return raw in ("true", "1")


def list_args() -> dict[str, Any]:
    return {"filter": request.args.get("filter"), "page_size": int_arg("pageSize"),
            "page_token": request.args.get("pageToken")}
