"""The emulator's controls as use cases (docs/controls.md): who may use them, reset, snapshots.

Every function takes the Emulator and the verified caller first, like the ml v1 use cases, and
checks the admin permission before anything else: `mlemu.admin`, which the role
`roles/mlemu.admin` (and `roles/owner`) grants on a project (auth/roles.py). Server-wide controls
are checked on the server's default project (MLEMU_PROJECT); a per-project reset on
that project. With IAM off everything is allowed, as for every other method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import auth
from core.payloads import Caller

if TYPE_CHECKING:
    from emulator import Emulator

ADMIN_PERMISSION = "mlemu.admin"


def authorize_admin(emu: Emulator, caller: Caller, project: str | None = None) -> None:
    """Raise 401/403 (Google's shape) unless the caller may use the controls."""
    auth.authorize(emu, caller, ADMIN_PERMISSION,
                   f"projects/{project or emu.settings.default_project}")
