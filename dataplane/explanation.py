"""`:explain`: the same authorize -> resolve steps as a prediction, then the attribution
method the version's explanationConfig names (explainers/), then the same bookkeeping."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import explainers
from core.errors import FailedPrecondition
from core.payloads import Caller, ModelRef, NumericInstances, PredictRequest
from dataplane.bookkeeping import touch
from dataplane.resolution import check_parameters, predict_permission, resolve
from registry import artifacts

if TYPE_CHECKING:
    from emulator import Emulator


def explain(emu: Emulator, caller: Caller, ref: ModelRef, req: PredictRequest,
            stop: Callable[[], bool] | None = None) -> list[Any]:
    """One `{"attributions_by_label": [...]}` per instance (explainers/); `stop` says whether
    the caller has gone (the work then stops: explainers.explain)."""
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
                                      instances, req.parameters, stop=stop,
                                      any_framework=emu.settings.explain_any_framework)
    touch(emu, version)
    return explanations
