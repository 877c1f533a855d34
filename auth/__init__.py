"""Authentication and authorization: who is calling, and may they do this?

`authorize(emu, caller, permission, resource)` is the first line of every use case. In IAM mode
`off` (the local default) every call is allowed; in `enforce` mode calls are denied unless a
policy grants the permission (policies arrive with the IAM work; until then enforce denies all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from errors import PermissionDenied
from payloads import ANONYMOUS, Caller

if TYPE_CHECKING:
    from emulator import Emulator

MODES = ("off", "enforce")


class Headers(Protocol):
    """Case-insensitive header lookup (werkzeug's Headers, grpc metadata adapters)."""

    def get(self, key: str, /) -> str | None: ...


def identify(emu: Emulator, headers: Headers) -> Caller:
    """The verified caller behind a request's headers (anonymous when IAM is off)."""
    return ANONYMOUS


def denied(permission: str, resource: str) -> PermissionDenied:
    return PermissionDenied(
        f"Permission '{permission}' denied on resource '{resource}' (or it may not exist)."
    )


def authorize(emu: Emulator, caller: Caller, permission: str, resource: str) -> None:
    """Raise PermissionDenied unless `caller` holds `permission` on `resource`."""
    if emu.settings.iam_mode == "off":
        return
    raise denied(permission, resource)


def on_model_created(emu: Emulator, caller: Caller, model_name: str) -> None:
    """Called by models.create: the creator gets roles/ml.modelOwner on the model (IAM issue)."""
