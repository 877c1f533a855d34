"""google.longrunning.Operations for Vertex AI: get, list, cancel, delete and wait, at the
location (`projects/{p}/locations/{l}/operations`) and under each resource
(`.../models/{m}/operations`, `.../endpoints/{e}/operations`), the paths the SDK polls.

Operations are done when recorded (controlplane/vertex/__init__.py), but for an upload or deploy
a timing rule holds (deferred.py): each get counts as a poll for that rule. Wait answers the
latest state at once (google/longrunning/operations.proto: WaitOperation "is on a best-effort
basis. It may return the latest state before the specified timeout (including immediately)");
cancel changes nothing, as the proto allows for a finished operation (a held one still runs:
"the server makes a best effort to cancel the operation, but success is not guaranteed").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import auth
from controlplane.vertex import listing
from controlplane.vertex.common import not_found
from core.payloads import Caller
from registry import vertex_resources as vr

if TYPE_CHECKING:
    from emulator import Emulator


def _get(emu: Emulator, name: str) -> dict[str, Any]:
    doc = emu.store.get(vr.OPERATIONS, name)
    if doc is None:
        raise not_found("Operation", name)
    return doc


def get_operation(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.operations.get", name)
    emu.controls.timing.polled(name)  # a timing rule may wait for N polls (controls/timing.py)
    return vr.operation_json(_get(emu, name))


def wait_operation(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    return get_operation(emu, caller, name)


def cancel_operation(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.operations.cancel", name)
    _get(emu, name)
    return {}


def delete_operation(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.operations.delete", name)
    _get(emu, name)
    emu.store.delete(vr.OPERATIONS, name)
    return {}


def list_operations(emu: Emulator, caller: Caller, parent: str, **paging: Any) -> dict[str, Any]:
    """`parent` is a location or a resource: its operations (a location lists them all)."""
    auth.authorize(emu, caller, "aiplatform.operations.list", parent)
    prefix = parent + "/operations/"
    location = vr.operation_parent(prefix + "x")
    items = [vr.operation_json(doc) for doc in emu.store.children(vr.OPERATIONS, location)
             if parent == location or doc["name"].startswith(prefix)]
    return listing.list_response(items, "operations", **paging)
