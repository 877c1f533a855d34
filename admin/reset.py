"""`POST /_mlemu/reset`: the emulator, or one project, back to its starting state.

Starting state is the bootstrap file's models and versions as they stood once loaded
(`Emulator.baseline`); everything else in the store goes: resources, operations and their tasks,
jobs (a running job's process sees its job gone and stops its pipeline, controlplane/job_work.py),
IAM policies set through the API, request-response log rows. Bootstrap rows are rewritten only
where they changed, so their versions keep their uid and their loaded predictors: the next test
does not pay a reload. Fault rules, timing rules and the journal are cleared (for one project:
the fault rules that name it). Predictors of versions that no longer exist are unloaded here at
once, and by every other process at its next lookup or tick (the store's uid check).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from admin import authorize_admin
from core.errors import InvalidArgument, Unavailable
from core.payloads import Caller
from registry.store_base import KINDS

if TYPE_CHECKING:
    from emulator import Emulator

_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: How long a reset waits for this process to finish loading the bootstrap models (its baseline
#: is known only then).
WARM_WAIT_S = 120.0


def parse_reset(body: Any) -> str | None:
    """The project a reset body names (None: the whole emulator)."""
    if body is None or body == {}:
        return None
    if not isinstance(body, dict) or set(body) != {"project"}:
        raise InvalidArgument('A reset body is {} or {"project": "PROJECT_ID"}.')
    project = body["project"]
    if not isinstance(project, str) or not _PROJECT.fullmatch(project):
        raise InvalidArgument("project must be a project id (letters, digits, '-', '_', '.').")
    return project


def reset(emu: Emulator, caller: Caller, body: Any) -> dict[str, Any]:
    project = parse_reset(body)
    authorize_admin(emu, caller, project)
    if not emu.warmed.wait(WARM_WAIT_S):
        raise Unavailable("The server is still loading its bootstrap models; retry the reset.")
    prefix = f"projects/{project}/" if project else ""
    store = emu.store
    with store.transaction():
        for kind in KINDS:
            kept = emu.baseline.get(kind, {})
            for name, _parent, doc in store.rows(kind, prefix):
                wanted = kept.get(name)
                if wanted is None:
                    store.delete(kind, name)
                elif doc != wanted[1]:
                    store.put(kind, name, wanted[0], wanted[1])
            present = {name for name, _, _ in store.rows(kind, prefix)}
            for name, (parent, doc) in kept.items():
                if name.startswith(prefix) and name not in present:
                    store.put(kind, name, parent, doc)
    if project is None:
        emu.controls.reset()
    else:
        emu.controls.faults.clear(project=project)
    emu.last_use.clear()
    emu.prune_deployments()
    return {}
