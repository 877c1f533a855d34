"""ml v1 `projects.operations` (get, list, cancel) and the making and ending of Operations.

Operation names follow the real service: `projects/{p}/operations/create_{model}_{version}-{unix
ms}` for versions.create, `delete_..`, `update_..` for the others (`{model}` alone for model
operations). Metadata is `google.cloud.ml.v1.OperationMetadata`; a finished operation carries
the resource (`response`) or a google.rpc.Status (`error`). Cancelling is immediate: the task is
removed, the resource returns to where it was (a version being created ends FAILED with an
errorMessage), and the operation ends with code 1 CANCELLED, as google.longrunning specifies.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import auth
from controlplane import listing
from controlplane.common import not_found_operation
from controlplane.project import project_number
from core.errors import ApiError, Cancelled, InvalidArgument
from core.payloads import Caller
from registry import names, tasks
from registry.resources import Operation, now_rfc3339
from registry.store import Store

if TYPE_CHECKING:
    from emulator import Emulator

CANCELLED_MESSAGE = "Operation cancelled by the caller."
_OPERATION_FIELDS = ("name", "metadata", "done", "error", "response")


def start(emu: Emulator, *, project: str, op_type: str, prefix: str, target: str,
          model_name: str, version: dict[str, Any] | None = None,
          labels: dict[str, str] | None = None, args: dict[str, Any] | None = None) -> Operation:
    """Record a new Operation and its task; call inside the transaction that changes `target`,
    and `emu.tasks.submit(op.name)` once it commits."""
    ms = int(time.time() * 1000)
    while emu.store.get_operation(names.operation_name(project, f"{prefix}-{ms}")) is not None:
        ms += 1  # two operations on one resource within a millisecond
    name = names.operation_name(project, f"{prefix}-{ms}")
    now = now_rfc3339()
    metadata: dict[str, Any] = {"createTime": now, "startTime": now, "operationType": op_type,
                                "modelName": model_name, "projectNumber": project_number(project)}
    if version is not None:
        metadata["version"] = version
    if labels:
        metadata["labels"] = dict(labels)
    op = Operation(name=name, metadata=metadata)
    emu.store.put_operation(op)
    tasks.put(emu.store, emu.tasks.new_task(name, op_type, target, dict(args or {})))
    return op


def finish(store: Store, name: str, *, response: dict[str, Any] | None = None,
           error: ApiError | None = None, version: dict[str, Any] | None = None) -> None:
    """End an operation (inside the caller's transaction)."""
    op = store.get_operation(name)
    if op is None or op.done:
        return
    op.done = True
    op.metadata["endTime"] = now_rfc3339()
    if version is not None:
        op.metadata["version"] = version
    if error is not None:
        op.error = {"code": error.code.number, "message": error.message}
    else:
        op.response = response or {"@type": "type.googleapis.com/google.protobuf.Empty"}
    store.put_operation(op)


def _get(emu: Emulator, name: str) -> Operation:
    op = emu.store.get_operation(name)
    if op is None:
        raise not_found_operation(name)
    return op


def get_operation(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.operations.get", name)
    op = _get(emu, name)
    emu.controls.timing.polled(name)  # a timing rule may wait for N polls (controls/timing.py)
    return op.to_json()


def list_operations(emu: Emulator, caller: Caller, name: str, *, filter: str | None = None,
                    page_size: int | None = None, page_token: str | None = None,
                    return_partial_success: bool = False) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.operations.list", name)
    if return_partial_success:
        # google.longrunning: only meaningful across collections, which ml v1 has none of.
        raise InvalidArgument("returnPartialSuccess is not supported for ml v1 operations.")
    items = [op.to_json() for op in emu.store.list_operations(name)]
    return listing.list_response(items, "operations", _OPERATION_FIELDS, filter=filter,
                                 page_size=page_size, page_token=page_token)


def cancel_operation(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.operations.cancel", name)
    with emu.store.transaction():
        op = _get(emu, name)
        if op.done:
            return {}  # nothing left to cancel; the operation keeps its outcome
        op.metadata["isCancellationRequested"] = True
        emu.store.put_operation(op)
        task = tasks.get(emu.store, name)
        if task is not None:
            # How a cancelled operation puts its resource back: registered with the runner
            # (controlplane/operation_work.py), run inside this transaction.
            handler = emu.tasks.handler(task.type)
            if handler is not None and handler.revert is not None:
                handler.revert(emu, task)
            tasks.delete(emu.store, name)
        finish(emu.store, name, error=Cancelled(CANCELLED_MESSAGE))
    return {}
