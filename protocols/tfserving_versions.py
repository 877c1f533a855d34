"""TF Serving's view of the registry: version numbers, version labels, model status.

TF Serving names versions by int64 number and by label; ml v1 version ids must start with a
letter. The mapping (documented in docs/tensorflow.md):

- a version's number is `serving: {tfServingVersion: N}` from the bootstrap file, else the
  trailing digits of its id (`v3` -> 3, `model_2024` -> 2024); a version with neither has no
  number: it is served as the model's default and through labels, and left out of the status list.
  When two versions claim one number, the explicit `tfServingVersion` wins, then the older version.
- labels are per model in the bootstrap file, `serving: {labels: {stable: v1, canary: 2}}`, naming
  a version id or a number.
- a request without a version (TF Serving's `Latest(name)`) runs the highest numbered READY
  version, as TF Serving does (tensorflow/serving tensorflow_serving/core/manager.h,
  ServableRequest::Latest: "the latest loaded version"; seeds 000 and 001: "/versions/${VERSION}
  ... is optional. If omitted the latest version is used"). A model with no numbered READY
  version runs its default version. MLEMU_TFSERVING_UNVERSIONED=default runs the ml v1 default
  version instead, the one AI Platform's `:predict` runs, for users who steer both protocols
  with `defaultVersion`.

Lookups go through dataplane.resolve, so IAM is checked first and the same way as for ml v1. No
Flask here: the blueprint in protocols/tfserving.py turns these into HTTP.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import auth
import dataplane
from core.errors import ApiError, FailedPrecondition, InvalidArgument, NotFound
from core.payloads import Caller, ModelRef
from predictors.base import Predictor
from registry import names
from registry.resources import Version

if TYPE_CHECKING:
    from emulator import Emulator

NUMBER_KEY = "tfServingVersion"
LABELS_KEY = "labels"
_TRAILING_DIGITS = re.compile(r"(\d+)$")

#: ml v1 Version.state -> TF Serving ModelVersionStatus.State.
_STATES = {"READY": "AVAILABLE", "CREATING": "LOADING", "UPDATING": "LOADING",
           "DELETING": "UNLOADING", "FAILED": "END", "UNKNOWN": "START"}


def number_of(version: Version) -> int | None:
    explicit = (version.serving or {}).get(NUMBER_KEY)
    if explicit is not None:
        try:
            return int(explicit)
        except (TypeError, ValueError):
            return None
    match = _TRAILING_DIGITS.search(names.short(version.name))
    return int(match.group(1)) if match else None


def numbered(emu: Emulator, model_name: str) -> dict[int, Version]:
    """number -> version for every numbered version of a model."""
    found: dict[int, Version] = {}
    ranked = sorted(emu.store.list_versions(model_name),
                    key=lambda v: (NUMBER_KEY not in (v.serving or {}), v.create_time, v.name))
    for version in ranked:
        number = number_of(version)
        if number is not None and number not in found:
            found[number] = version
    return found


def latest_ready(emu: Emulator, model_name: str) -> str | None:
    """The id of the highest numbered READY version of a model (None: it has none). Cached on
    the store (Store.memo) until it changes, as registry/lookup.py caches the serving version, so a
    versionless request costs no listing of the model's versions."""
    memo: dict[str, str | None] | None = emu.store.memo("tfserving_latest")
    if memo is None:
        return _latest_ready(emu, model_name)
    if model_name not in memo:
        memo[model_name] = _latest_ready(emu, model_name)
    return memo[model_name]


def _latest_ready(emu: Emulator, model_name: str) -> str | None:
    ready = {n: v for n, v in numbered(emu, model_name).items() if v.state in ("READY", "UPDATING")}
    return names.short(ready[max(ready)].name) if ready else None


def _label_target(emu: Emulator, model_name: str, label: str) -> str | int:
    model = emu.store.get_model(model_name)
    labels: Any = (model.serving or {}).get(LABELS_KEY) if model is not None else None
    target = labels.get(label) if isinstance(labels, dict) else None
    if target is None or isinstance(target, bool):
        raise InvalidArgument(f"Unrecognized servable version label: {label}")
    return target if isinstance(target, int) else str(target)


def _version_id(emu: Emulator, model: str, model_name: str, number: int) -> str:
    version = numbered(emu, model_name).get(number)
    if version is None:
        raise NotFound(f"Servable not found for request: Specific({model}, {number})")
    return names.short(version.name)


def admit(emu: Emulator, caller: Caller, project: str, model: str, number: int | None,
          label: str | None, permission: str) -> None:
    """`resolve`'s permission check alone, for before the request body is read."""
    if number is not None or label is not None:
        permission = permission.replace("ml.models.", "ml.versions.")
    auth.authorize(emu, caller, permission, names.model_name(project, model))


def resolve(emu: Emulator, caller: Caller, project: str, model: str, number: int | None,
            label: str | None, permission: str) -> tuple[Version, Predictor]:
    """The version a TF Serving request names (Latest, a number or a label) and its predictor.

    `permission` is the models.* one ("ml.models.predict"); version requests check versions.*.
    """
    model_name = names.model_name(project, model)
    version_permission = permission.replace("ml.models.", "ml.versions.")
    if number is None and label is None:
        ref, spec, wanted = ModelRef(project, model), f"Latest({model})", permission
        if emu.settings.tfserving_unversioned == "latest":
            auth.authorize(emu, caller, permission, model_name)  # before any lookup
            latest = latest_ready(emu, model_name)
            if latest is not None:
                ref = ModelRef(project, model, latest)
    else:
        auth.authorize(emu, caller, version_permission, model_name)  # before any lookup
        target: str | int = number if number is not None else _label_target(emu, model_name, label or "")
        if isinstance(target, int):
            ref = ModelRef(project, model, _version_id(emu, model, model_name, target))
            spec = f"Specific({model}, {target})"
        else:  # a label naming a version id: report it by number when it has one
            named = emu.store.get_version(names.version_name(project, model, target))
            shown = number_of(named) if named is not None else None
            ref = ModelRef(project, model, target)
            spec = f"Specific({model}, {shown if shown is not None else target})"
        wanted = version_permission
    try:
        return dataplane.resolve(emu, caller, ref, wanted)
    except NotFound:
        raise NotFound(f"Servable not found for request: {spec}") from None
    except FailedPrecondition as exc:  # no default version, or not READY: nothing is serving
        raise NotFound(f"Servable not found for request: {spec}. {exc.message}") from None


def serve(emu: Emulator, caller: Caller, project: str, model: str, number: int | None,
          label: str | None) -> dataplane.Served:
    """`resolve` for a prediction: the data plane's Served, through which the model runs."""
    return dataplane.Served(emu, *resolve(emu, caller, project, model, number, label,
                                          "ml.models.predict"))


def _status(emu: Emulator, version: Version) -> dict[str, Any]:
    number = number_of(version)
    state, code, message = _STATES.get(version.state, "START"), "OK", ""
    if version.state == "READY":
        try:
            emu.deployments.get(version)  # AVAILABLE means loaded, as in TF Serving
        except ApiError as exc:
            state, code, message = "END", exc.code.name, exc.message
    elif version.state == "FAILED":
        code, message = "FAILED_PRECONDITION", version.error_message
    return {"version": str(number if number is not None else 0), "state": state,
            "status": {"error_code": code, "error_message": message}}


def model_status(emu: Emulator, caller: Caller, project: str, model: str, number: int | None,
                 label: str | None) -> dict[str, Any]:
    """GetModelStatusResponse: every numbered version (newest first), or the one named."""
    model_name = names.model_name(project, model)
    if number is None and label is None:
        auth.authorize(emu, caller, "ml.models.get", model_name)
        versions = numbered(emu, model_name)
        if not versions:
            raise NotFound(f"Could not find any versions of model {model}")
        return {"model_version_status": [_status(emu, versions[n]) for n in sorted(versions, reverse=True)]}
    auth.authorize(emu, caller, "ml.versions.get", model_name)
    if label is not None:
        target = _label_target(emu, model_name, label)
        if isinstance(target, str):
            version = emu.store.get_version(names.version_name(project, model, target))
            if version is None:
                raise NotFound(f"Could not find version {target} of model {model}")
            return {"model_version_status": [_status(emu, version)]}
        number = target
    found = numbered(emu, model_name).get(number)  # type: ignore[arg-type]
    if found is None:
        raise NotFound(f"Could not find version {number} of model {model}")
    return {"model_version_status": [_status(emu, found)]}
