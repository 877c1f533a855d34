"""Authentication and authorization: who is calling, and may they do this?

`authorize(emu, caller, permission, resource)` is the first line of every use case, before any
lookup, so a refusal never tells whether the resource exists. IAM mode `off` (the local default)
allows everything and does not look at credentials; `enforce` allows a call only when a policy
binding grants the permission to the caller: the project's policy (IAM config file) or, for a
model and its versions, the model's policy (the store). A refused anonymous caller gets 401
UNAUTHENTICATED, a refused verified one 403 PERMISSION_DENIED.

Modules: identity (credentials -> Caller, google-auth), keys (public keys and certificates),
roles (predefined roles as data), policy (Policy, member matching), config (the IAM config file).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from auth.config import IamConfig, IamConfigError, load
from auth.policy import (
    KIND,
    Binding,
    Policy,
    job_of,
    matches,
    model_of,
    new_etag,
    parse_bindings,
    policy_from_storage,
    policy_to_storage,
    project_of,
)
from core.errors import PermissionDenied, Unauthenticated
from core.payloads import ANONYMOUS, Caller
from core.setting_table import IAM_MODES

if TYPE_CHECKING:
    from core.settings import Settings
    from registry.store_base import Store


class IamView(Protocol):
    """What authorization reads of an emulator (its settings' IAM mode, the IAM config, and the
    store that keeps model and job policies): a narrow view, so auth depends on no layer above."""

    settings: Settings
    policy: IamConfig
    store: Store

__all__ = ["MODES", "Binding", "Caller", "IamConfig", "IamConfigError", "Policy", "authorize",
           "denied", "enforced", "granted", "held_permissions", "identify", "is_role", "job_of",
           "load_config", "new_etag", "on_model_created", "on_model_deleted", "parse_bindings",
           "require_authenticated", "require_identity_unless_public"]
#: MLEMU_IAM_MODE is checked by settings.py; a Settings built in code is checked by load_config.
MODES = IAM_MODES
MODEL_OWNER = "roles/ml.modelOwner"
_EMPTY = IamConfig()


class Headers(Protocol):
    """Case-insensitive header lookup (werkzeug's Headers, grpc metadata adapters)."""

    def get(self, key: str, /) -> str | None: ...


def load_config(settings: Settings) -> IamConfig:
    """The IAM configuration an emulator runs with (checked at start, so mistakes fail early)."""
    if settings.iam_mode not in MODES:
        raise IamConfigError(f"MLEMU_IAM_MODE must be one of {', '.join(MODES)}, "
                             f"not {settings.iam_mode!r}.")
    return load(settings.iam_config) if settings.iam_config is not None else _EMPTY


def _config(emu: IamView) -> IamConfig:
    return emu.policy if isinstance(emu.policy, IamConfig) else _EMPTY


def is_role(emu: IamView, role: str) -> bool:
    """A predefined role or one of the config's custom roles."""
    return _config(emu).is_role(role)


def enforced(emu: IamView) -> bool:
    return bool(emu.settings.iam_mode == "enforce")


def identify(emu: IamView, headers: Headers) -> Caller:
    """The verified caller behind a request's headers (anonymous when IAM is off)."""
    if not enforced(emu):
        return ANONYMOUS
    from auth import identity  # google-auth's JWT code loads only when IAM is enforced

    return identity.identify(emu.settings, _config(emu), headers)


def denied(permission: str, resource: str) -> PermissionDenied:
    return PermissionDenied(
        f"Permission '{permission}' denied on resource '{resource}' (or it may not exist).",
        details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                  "reason": "IAM_PERMISSION_DENIED", "domain": "iam.googleapis.com",
                  "metadata": {"permission": permission, "resource": resource}}],
    )


def granted(emu: IamView, caller: Caller, resource: str) -> frozenset[str]:
    """Every permission `caller` holds on `resource` (project bindings + model bindings)."""
    config = _config(emu)
    bindings: list[Binding] = list(config.project_bindings.get(project_of(resource) or "", ()))
    # A model's policy covers it and its versions; a job has its own (projects.jobs.setIamPolicy).
    holder = model_of(resource) or job_of(resource)
    if holder is not None:
        bindings += get_policy(emu, holder).bindings
    held: set[str] = set()
    for binding in bindings:
        if any(matches(member, caller, config.memberships) for member in binding.members):
            held |= config.role_permissions(binding.role)
    return frozenset(held)


def _missing_credentials() -> Unauthenticated:
    from auth import identity

    return identity.missing_credentials()


def authorize(emu: IamView, caller: Caller, permission: str, resource: str) -> None:
    """Raise unless `caller` holds `permission` on `resource` (401 anonymous, 403 otherwise)."""
    if not enforced(emu) or permission in granted(emu, caller, resource):
        return
    if caller.is_anonymous:
        raise _missing_credentials()
    raise denied(permission, resource)


def require_identity_unless_public(emu: IamView, caller: Caller, project_name: str) -> None:
    """Before a request's body is read, when the path names no resource: an anonymous
    caller is refused (401) unless some policy of the project grants `allUsers` anything, so
    nothing is decoded for a caller who could not be allowed whatever the body says."""
    if not enforced(emu) or not caller.is_anonymous or granted(emu, caller, project_name):
        return
    for stored in emu.store.children(KIND, project_name):  # model policies
        if any(m == "allUsers" for b in policy_from_storage(stored).bindings for m in b.members):
            return
    raise _missing_credentials()


def require_authenticated(emu: IamView, caller: Caller) -> None:
    """For routes that name no resource (server metadata): any verified caller may use them."""
    if enforced(emu) and caller.is_anonymous:
        raise _missing_credentials()


def held_permissions(emu: IamView, caller: Caller, resource: str,
                     permissions: Iterable[str]) -> list[str]:
    """The subset of `permissions` the caller holds on `resource` (all of them when IAM is off)."""
    wanted = list(dict.fromkeys(permissions))
    if not enforced(emu):
        return wanted
    held = granted(emu, caller, resource)
    subset = [p for p in wanted if p in held]
    if not subset and caller.is_anonymous:
        raise _missing_credentials()
    return subset


# --- model and job policies in the store (generic Store API only: any backend keeps them) --

def get_policy(emu: IamView, resource: str) -> Policy:
    """The policy set on a model or a job (the empty policy if none was)."""
    return policy_from_storage(emu.store.get(KIND, resource))


def put_policy(emu: IamView, resource: str, policy: Policy) -> None:
    emu.store.put(KIND, resource, "/".join(resource.split("/")[:2]), policy_to_storage(policy))


def on_model_created(emu: IamView, caller: Caller, model_name: str) -> None:
    """models.create: the creator gets roles/ml.modelOwner on the new model (in its transaction)."""
    emu.store.delete(KIND, model_name)  # a model re-created under an old name starts afresh
    if caller.principal is not None:
        put_policy(emu, model_name, Policy([Binding(MODEL_OWNER, [caller.principal])], new_etag()))


def on_model_deleted(emu: IamView, model_name: str) -> None:
    """models.delete: the model's policy goes with it (in the deleting transaction)."""
    emu.store.delete(KIND, model_name)
