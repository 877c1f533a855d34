"""Vertex AI PredictionService use cases: predict, rawPredict and explain on an endpoint.

authorize (`aiplatform.endpoints.predict`/`.explain` on the endpoint) -> the endpoint's routes
(registry/vertex_serving.py: cached per thread on the store's change token, so no query while
nothing changed) -> a deployed model chosen by the traffic split (or named by the request) ->
its predictor from the deployments cache -> `dataplane.predict_resolved`, the same batching,
metrics and parameter rules as every other protocol.

Built-in frameworks get no `parameters` (Vertex AI's prebuilt sklearn/xgboost/tf2 servers pass
only the instances to the model); custom predictors get them as keyword arguments.
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING, Any

import auth
import dataplane
import explainers
from core.errors import FailedPrecondition, NotFound
from core.payloads import Caller, PredictRequest, PredictResponse
from dataplane.bookkeeping import finish
from explainers import vertex_parameters, vertex_spec
from observability import context, instrument
from predictors.base import Predictor
from predictors.container import ContainerPredictor
from registry import vertex_serving
from registry.vertex_serving import Target

if TYPE_CHECKING:
    from emulator import Emulator

PREDICT = "aiplatform.endpoints.predict"
EXPLAIN = "aiplatform.endpoints.explain"


def admit(emu: Emulator, caller: Caller, endpoint: str, permission: str = PREDICT) -> None:
    """The permission on the endpoint the path names, before the body is read."""
    auth.authorize(emu, caller, permission, endpoint)


def resolve(emu: Emulator, caller: Caller, endpoint: str, permission: str,
            deployed_model_id: str | None = None) -> tuple[Target, Predictor]:
    auth.authorize(emu, caller, permission, endpoint)
    routes = vertex_serving.routes(emu.store, endpoint)
    if routes is None:
        raise NotFound(f"Endpoint `{endpoint}` not found.")
    target = routes.pick(emu.vertex_routers, deployed_model_id)
    model = target.model.rsplit("/", 1)[-1]
    project = endpoint.split("/")[1] if endpoint.startswith("projects/") else ""
    context.set_target(model, target.deployed_model_id, caller.principal, project)
    ctx = context.current()
    if ctx is not None:  # the journal's names for a Vertex AI prediction
        ctx.endpoint, ctx.deployed_model = endpoint.rsplit("/", 1)[-1], target.deployed_model_id
    # Fault and latency rules (controls/), as dataplane.resolve applies them to the others.
    emu.controls.check(project, model, target.deployed_model_id,
                       endpoint=endpoint.rsplit("/", 1)[-1],
                       deployed_model=target.deployed_model_id, api="vertex")
    return target, emu.deployments.get(target.version)


def predict(emu: Emulator, caller: Caller, endpoint: str, req: PredictRequest,
            deployed_model_id: str | None = None) -> tuple[Target, PredictResponse]:
    target, predictor = resolve(emu, caller, endpoint, PREDICT, deployed_model_id)
    return target, predict_on(emu, target, predictor, req)


def predict_on(emu: Emulator, target: Target, predictor: Predictor,
               req: PredictRequest) -> PredictResponse:
    """The prediction once `resolve` chose the deployed model (rawPredict resolves first, to
    learn whether the body is forwarded as it is)."""
    if predictor.framework:
        req = PredictRequest(req.instances)
    return dataplane.predict_resolved(emu, target.version, predictor, req, stored=False)


def forward_raw(emu: Emulator, target: Target, predictor: Predictor, body: bytes,
                content_type: str) -> tuple[int, str, bytes] | None:
    """rawPredict on a custom container (predictors/container.py): the body and its content
    type go to its predict route as they came, and its (status, content type, body) come back,
    as Vertex AI's rawPredict does; then the same bookkeeping as a prediction. None: the model
    is not a container (the caller decodes `{"instances": ...}` for the prebuilt contract)."""
    if not isinstance(predictor, ContainerPredictor):
        return None
    started = perf_counter()
    with instrument.attributed(target.version.name):
        status, answer_type, answer = predictor.raw(body, content_type)
    if emu.instruments is not None:  # the model-call metrics `predict`'s timed method records
        emu.instruments.version(target.version.name).model_call(perf_counter() - started, [body])
    finish(emu, target.version, [body], {}, [answer], stored=False)
    return status, answer_type, answer


def explain(emu: Emulator, caller: Caller, endpoint: str, req: PredictRequest,
            deployed_model_id: str | None = None, override: dict[str, Any] | None = None,
            ) -> tuple[Target, Any, list[dict[str, Any]]]:
    """Predictions and their explanations (explainers/), with the deployed model's
    explanationSpec (or its model's), `override` applied (explainers/vertex_parameters.py)."""
    target, predictor = resolve(emu, caller, endpoint, EXPLAIN, deployed_model_id)
    spec = vertex_parameters.apply_override(dict(target.explanation_spec or {}), override)
    if not spec or target.explanations_disabled:
        raise FailedPrecondition(
            f"Deployed model {target.deployed_model_id} of endpoint `{endpoint}` does not support "
            "explanations: upload the model, or deploy it, with an explanationSpec.")
    instances = list(req.instances) if isinstance(req.instances, list) else req.instances.rows()
    result = dataplane.predict_resolved(emu, target.version, predictor, PredictRequest(instances),
                                        stored=False)
    explained = explainers.explain(predictor, vertex_spec.to_method(spec), None, instances,
                                   req.parameters if not predictor.framework else {},
                                   meta=vertex_spec.to_metadata(spec))
    return target, result.predictions, [vertex_spec.to_explanation(e) for e in explained]


def identity(target: Target) -> dict[str, Any]:
    """The deployed model's identity as a PredictResponse carries it."""
    return {"deployedModelId": target.deployed_model_id, "model": target.model,
            "modelDisplayName": target.model_display_name,
            "modelVersionId": target.model_version_id}


def identity_headers(target: Target) -> dict[str, str]:
    """rawPredict's answer names the deployed model in headers, as its HttpBody cannot: the
    names google-cloud-aiplatform reads (aiplatform/models.py `_RAW_PREDICT_*_KEY`)."""
    return {"X-Vertex-AI-Deployed-Model-Id": target.deployed_model_id,
            "X-Vertex-AI-Model": target.model,
            "X-Vertex-AI-Model-Version-Id": target.model_version_id}
