"""Fault rules, timing rules and the request journal as use cases: each checks the admin
permission (admin.authorize_admin), then asks the emulator's Controls (controls/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from admin import authorize_admin
from controls.journal import FILTERS, parse_time
from core.errors import InvalidArgument
from core.payloads import Caller

if TYPE_CHECKING:
    from emulator import Emulator


def add_fault(emu: Emulator, caller: Caller, body: Any) -> dict[str, Any]:
    authorize_admin(emu, caller)
    return emu.controls.faults.add(body)


def list_faults(emu: Emulator, caller: Caller) -> dict[str, Any]:
    authorize_admin(emu, caller)
    return {"faults": emu.controls.faults.list()}


def delete_fault(emu: Emulator, caller: Caller, rule_id: str | None) -> dict[str, Any]:
    """One rule, or every rule when `rule_id` is None."""
    authorize_admin(emu, caller)
    if rule_id is None:
        emu.controls.faults.clear()
    else:
        emu.controls.faults.delete(rule_id)
    return {}


def put_timing(emu: Emulator, caller: Caller, body: Any) -> dict[str, Any]:
    authorize_admin(emu, caller)
    return emu.controls.timing.put(body)


def list_timing(emu: Emulator, caller: Caller) -> dict[str, Any]:
    authorize_admin(emu, caller)
    return {"timing": emu.controls.timing.list()}


def clear_timing(emu: Emulator, caller: Caller, op_type: str | None) -> dict[str, Any]:
    authorize_admin(emu, caller)
    emu.controls.timing.clear(op_type)
    return {}


def list_requests(emu: Emulator, caller: Caller, args: dict[str, str]) -> dict[str, Any]:
    """The journal's entries matching `args` (query parameters), oldest first."""
    authorize_admin(emu, caller)
    unknown = sorted(set(args) - {*FILTERS, "since", "limit"})
    if unknown:
        raise InvalidArgument(f"Unknown query parameters {unknown}; the journal filters on "
                              f"{[*FILTERS, 'since', 'limit']}.")
    since = parse_time(args["since"]) if args.get("since") else None
    limit = args.get("limit")
    if limit is not None and (not limit.isdigit() or int(limit) < 1):
        raise InvalidArgument("limit must be a positive integer.")
    filters = {key: value for key, value in args.items() if key in FILTERS}
    rows = emu.controls.journal.entries(filters, since, int(limit) if limit else None)
    listed = []
    for row in rows:
        row.pop("timestamp", None)
        listed.append({"time": row.pop("time"), **row})
    return {"requests": listed}


def clear_requests(emu: Emulator, caller: Caller) -> dict[str, Any]:
    authorize_admin(emu, caller)
    emu.controls.journal.clear()
    return {}


def journal_settings(emu: Emulator, caller: Caller, body: Any = None) -> dict[str, Any]:
    """The journal's settings; changed first when `body` is given."""
    authorize_admin(emu, caller)
    if body is not None:
        return emu.controls.set_journal_settings(body)
    return emu.controls.journal_settings()
