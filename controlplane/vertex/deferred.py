"""Vertex AI's long-running methods held by a timing rule (docs/controls.md, controls/timing.py).

UploadModel and DeployModel do their work within the request and answer a done operation, as
fast as a test wants them, unless a timing rule names their operation type (`UPLOAD_MODEL`,
`DEPLOY_MODEL`): then the request answers a pending operation (`done` unset, as the service
answers these methods) and the work runs on the task runner (registry/tasks.py) once the rule
lets it (after N seconds or N polls of the operation), or the rule's `fail` ends the operation
with that error instead. The same functions do the work either way (deferred_work.py runs them
on the runner).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.errors import ApiError
from registry import tasks
from registry import vertex_resources as vr
from registry.resources import now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

UPLOAD_MODEL = "UPLOAD_MODEL"
DEPLOY_MODEL = "DEPLOY_MODEL"


def held(emu: Emulator, task_type: str) -> bool:
    """Whether a timing rule names `task_type` (one cached read while no rule changes)."""
    return task_type in emu.controls.timing.rules()


def start(emu: Emulator, parent: str, metadata_type: str, task_type: str,
          args: dict[str, Any]) -> dict[str, Any]:
    """Store a pending operation under `parent` and its task in one transaction, hand the task to
    this process's runner, and answer the operation."""
    now = now_rfc3339()
    name = f"{parent}/operations/{vr.new_id()}"
    doc = {"name": name, "metadata": {"@type": vr.TYPE_PREFIX + metadata_type,
                                      "genericMetadata": {"createTime": now, "updateTime": now}}}
    with emu.store.transaction():
        emu.store.put(vr.OPERATIONS, name, vr.operation_parent(name), doc)
        tasks.put(emu.store, emu.tasks.new_task(name, task_type, parent, args))
    emu.tasks.submit(name, task_type)
    return vr.operation_json(doc)


def end(emu: Emulator, name: str, response: dict[str, Any] | None, response_type: str,
        error: ApiError | None) -> None:
    """Finish the operation `name` with `response` (of `response_type`) or `error` (a
    google.rpc.Status), as record_operation stores a done one."""
    doc = emu.store.get(vr.OPERATIONS, name)
    if doc is None:  # deleted meanwhile (operations.delete): nothing left to tell
        return
    doc["metadata"]["genericMetadata"]["updateTime"] = now_rfc3339()
    doc["done"] = True
    if error is not None:
        doc["error"] = {"code": error.code.number, "message": error.message}
    else:
        doc["response"] = {"@type": vr.TYPE_PREFIX + response_type, **(response or {})}
    emu.store.put(vr.OPERATIONS, name, vr.operation_parent(name), doc)
