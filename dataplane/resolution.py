"""The data plane's first steps: who may predict (authorize, before and after the body is read)
and what serves the request (resolve: the READY version a reference names and its loaded
predictor).

`resolve` is the one point every prediction, explanation and metadata read passes right after
the registry named the version, whichever protocol it came in on: what should happen to each
resolved request (its labels on logs and metrics today) happens there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import auth
from core.errors import InvalidArgument
from core.payloads import Caller, ModelRef
from observability import context
from predictors.base import Predictor
from registry import lookup
from registry.resources import Version

if TYPE_CHECKING:
    from emulator import Emulator


def predict_permission(ref: ModelRef) -> str:
    return "ml.versions.predict" if ref.version is not None else "ml.models.predict"


def admit(emu: Emulator, caller: Caller, ref: ModelRef) -> None:
    """The predict permission on what the request's path names, checked before its body is read:
    a caller who may not predict there gets 401/403 without the server decoding (and allocating)
    anything. `resolve` repeats the same check (same permission, same resource name) for the
    use cases no adapter admitted first; in IAM mode `off` both return at once."""
    auth.authorize(emu, caller, predict_permission(ref), ref.resource_name)


def resolve(emu: Emulator, caller: Caller, ref: ModelRef, permission: str) -> tuple[Version, Predictor]:
    """Check `permission`, then find the READY version `ref` names and its loaded predictor."""
    auth.authorize(emu, caller, permission, ref.resource_name)
    version = lookup.serving_version(emu.store, ref)
    # Logs and metrics name what the registry resolved (never a name a request made up).
    version_id = version.name.rsplit("/", 1)[1]
    context.set_target(ref.model, version_id, caller.principal, ref.project)
    # Fault and latency rules (controls/): one shared-word comparison when none is set.
    emu.controls.check(ref.project, ref.model, version_id)
    return version, emu.deployments.get(version)


def check_parameters(predictor: Predictor, parameters: dict[str, object]) -> None:
    """Refuse request keys a built-in framework does not take (custom code takes them all)."""
    accepted = predictor.accepted_parameters
    if accepted is None:
        return
    unknown = sorted(set(parameters) - accepted)
    if unknown:
        # Google's wording for unknown request fields, plus what this framework does accept.
        names = " ".join(f'Unknown name "{name}": Cannot find field.' for name in unknown)
        allowed = ", ".join(["instances", *sorted(accepted)])
        raise InvalidArgument(
            f"Invalid JSON payload received. {names} A {predictor.framework or 'built-in'} "
            f"model accepts only: {allowed}. Extra keys are passed only to custom predictors."
        )
