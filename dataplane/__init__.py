"""Prediction and explanation use cases: authorize -> resolve the serving version -> predictor ->
predictions (or feature attributions, explainers/).

Every serving protocol ends here, so permissions, version resolution and errors behave the same
whichever wire format a request came in on.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import auth
import explainers
from core.errors import FailedPrecondition, InvalidArgument
from core.payloads import Caller, ModelRef, NumericInstances, PredictRequest, PredictResponse
from observability import context
from predictors.base import Predictor
from registry import artifacts, lookup
from registry.resources import Version, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

log = logging.getLogger("mlemu")
#: lastUseTime is written at most this often per version and emulator (a write per request
#: would serialise every prediction on the store's write lock); Emulator.last_use remembers when.
LAST_USE_INTERVAL_S = 60.0


def predict_permission(ref: ModelRef) -> str:
    return "ml.versions.predict" if ref.version is not None else "ml.models.predict"


def admit(emu: Emulator, caller: Caller, ref: ModelRef) -> None:
    """The predict permission on what the request's path names, checked before its body is read
    (issue 17): a caller who may not predict there gets 401/403 without the server decoding (and
    allocating) anything. `resolve` repeats the same check (same permission, same resource name)
    for the use cases no adapter admitted first; in IAM mode `off` both return at once."""
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


def predict(emu: Emulator, caller: Caller, ref: ModelRef, req: PredictRequest) -> PredictResponse:
    version, predictor = resolve(emu, caller, ref, predict_permission(ref))
    check_parameters(predictor, req.parameters)
    instances = req.instances
    if isinstance(instances, NumericInstances):
        instances = instances.array if predictor.takes_array(req.parameters) else instances.rows()
    context.set_instances(len(instances))
    limit = emu.settings.batch_max_instances
    if predictor.batchable and limit > 0 and not req.parameters:
        # Concurrent requests to this version share one model call (predictors/batching.py).
        observer = None if emu.instruments is None else (
            lambda: emu.instruments.version(version.name))  # type: ignore[union-attr]
        predictions = emu.deployments.batchers.get(predictor, limit, observer).predict(instances)
    else:
        predictions = predictor.predict(instances, **req.parameters)
    _touch(emu, version)
    logging_config = version.extra.get("requestLoggingConfig")
    if logging_config:  # AI Platform's request-response logging (observability/request_log.py)
        if not hasattr(predictions, "__len__"):  # a generator: the answer needs it too
            predictions = list(predictions)
        emu.request_log.offer(version.name, logging_config, instances, req.parameters, predictions)
    return PredictResponse(predictions=predictions, version_name=version.name)


def explain(emu: Emulator, caller: Caller, ref: ModelRef, req: PredictRequest) -> list[Any]:
    """`:explain`: one `{"attributions_by_label": [...]}` per instance (explainers/)."""
    version, predictor = resolve(emu, caller, ref, predict_permission(ref))
    if not version.explanation_config:
        raise FailedPrecondition(
            f"Version {version.name.rsplit('/', 1)[-1]} was not created with an explanationConfig; "
            "create a version with one to get explanations.")
    check_parameters(predictor, req.parameters)
    instances = req.instances
    if isinstance(instances, NumericInstances):
        instances = instances.rows()
    model_dir = artifacts.resolve_model_dir(version.deployment_uri, emu.deployments.gcs)
    explanations = explainers.explain(predictor, version.explanation_config, model_dir,
                                      instances, req.parameters)
    _touch(emu, version)
    return explanations


def _touch(emu: Emulator, version: Version) -> None:
    now = time.monotonic()
    last_use = emu.last_use
    if now - last_use.get(version.name, -LAST_USE_INTERVAL_S) < LAST_USE_INTERVAL_S:
        return
    last_use[version.name] = now

    def stamp(current: Version) -> bool:
        current.last_use_time = now_rfc3339()
        return True

    try:
        emu.store.update_version(version, stamp)
    except Exception as exc:  # noqa: BLE001 - bookkeeping never fails a computed prediction
        log.warning("could not record lastUseTime of %s: %s", version.name, exc)
