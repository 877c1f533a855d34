"""The data plane's one way to a model: batch -> model call (instrumented) -> bookkeeping.

Every protocol's adapter decodes its request, has the data plane resolve the version
(dataplane/resolution.py) and then runs the model through here, then encodes the answer:

- `predict`: the ml v1 `:predict` and Vertex AI use case, instances (and keyword parameters) in,
  predictions out, resolution included;
- `serve`: resolution alone, giving a `Served` for adapters that need the model's signature to
  decode (TF Serving, V2, grps); its `predict` (instances or numpy rows) and `predict_tensors`
  (named arrays: TensorFlow signatures) run the same steps as `predict`.

Concurrent requests to a batchable predictor merge (predictors/batching.py for lists of
instances, predictors/array_batching.py for numpy rows and named tensors); the loaded predictor's
methods are timed and attributed by the deployments cache (observability/instrument.py), merged
calls counted by the batch observer; then bookkeeping.finish stamps lastUseTime and logs the
request for a version with a requestLoggingConfig. So every protocol that reaches a version
gets the same batching, metrics, lastUseTime and request log.

Cf. KServe's python/kserve/kserve/protocol/dataplane.py (`DataPlane.infer`, shared by its REST
and gRPC servers) and MLServer's mlserver/handlers/dataplane.py (`DataPlane.infer`: model lookup,
metrics, then the model, for both transports).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from core.payloads import Caller, ModelRef, NumericInstances, PredictRequest, PredictResponse
from dataplane.bookkeeping import finish
from dataplane.resolution import check_parameters, predict_permission, resolve
from observability import context
from predictors.base import Predictor
from predictors.batching import BatchObserver, TensorCall
from registry.resources import Version

if TYPE_CHECKING:
    from emulator import Emulator

T = TypeVar("T")


def predict(emu: Emulator, caller: Caller, ref: ModelRef, req: PredictRequest) -> PredictResponse:
    """Instances in, predictions out: authorize -> resolve -> batch -> model -> bookkeeping."""
    version, predictor = resolve(emu, caller, ref, predict_permission(ref))
    return predict_resolved(emu, version, predictor, req)


def predict_resolved(emu: Emulator, version: Version, predictor: Predictor, req: PredictRequest,
                     *, stored: bool = True) -> PredictResponse:
    """The prediction once a surface resolved what serves it (`resolve`, or Vertex AI's endpoint
    routing in dataplane/vertex.py): parameters checked, batched, bookkept, logged. `stored`:
    the version is an ml v1 Version in the store (its lastUseTime is kept)."""
    check_parameters(predictor, req.parameters)
    instances = req.instances
    if isinstance(instances, NumericInstances):
        instances = instances.array if predictor.takes_array(req.parameters) else instances.rows()
    predictions = run_instances(emu, version, predictor, instances, req.parameters, stored=stored)
    return PredictResponse(predictions=predictions, version_name=version.name)


def run_instances(emu: Emulator, version: Version, predictor: Predictor, instances: Any,
                  parameters: dict[str, Any], *, stored: bool = True) -> Any:
    """`predictor.predict(instances, **parameters)`, merged with concurrent requests where it
    may be (a batchable predictor, batching on, no parameters of the request's own)."""
    if hasattr(instances, "__len__"):  # the request journal's instance count (controls/)
        context.set_instances(len(instances))
    limit = emu.settings.batch_max_instances
    if predictor.batchable and limit > 0 and not parameters:
        observer = _observer(emu, version)
        batchers = emu.deployments.batchers
        batcher = (batchers.get(predictor, limit, observer) if isinstance(instances, list)
                   else batchers.arrays(predictor, limit, observer))
        predictions = batcher.predict(instances)
    else:
        predictions = predictor.predict(instances, **parameters)
    return finish(emu, version, instances, parameters, predictions, stored=stored)


def _observer(emu: Emulator, version: Version) -> Callable[[], BatchObserver | None] | None:
    """What makes a new batcher's metrics recorder (called only when one is made)."""
    instruments = emu.instruments
    if instruments is None:
        return None
    return lambda: instruments.version(version.name)


def serve(emu: Emulator, caller: Caller, ref: ModelRef, permission: str | None = None) -> Served:
    """Authorize and resolve (`permission`: the predict permission `ref` needs by default)."""
    return Served(emu, *resolve(emu, caller, ref, permission or predict_permission(ref)))


class Served:
    """A resolved version and its loaded predictor, through which an adapter runs the model."""

    __slots__ = ("emu", "predictor", "version")

    def __init__(self, emu: Emulator, version: Version, predictor: Predictor) -> None:
        self.emu = emu
        self.version = version
        self.predictor = predictor

    @property
    def version_id(self) -> str:
        return self.version.name.rsplit("/", 1)[-1]

    def predict(self, instances: Any, parameters: dict[str, Any] | None = None) -> Any:
        """Predictions for `instances` (a list, or a numpy array of rows where the predictor
        `takes_arrays`); `parameters` are passed as keyword arguments."""
        return run_instances(self.emu, self.version, self.predictor, instances, parameters or {})

    def predict_tensors(self, inputs: Mapping[str, np.ndarray], signature_name: str | None = None,
                        output_names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """A tensor-native predictor's outputs for named input arrays (a signature's run)."""
        emu, predictor = self.emu, self.predictor
        names = tuple(output_names) if output_names else None
        limit = emu.settings.batch_max_instances
        if predictor.batchable and limit > 0:
            batcher = emu.deployments.batchers.tensors(predictor, limit,
                                                       _observer(emu, self.version))
            outputs = batcher.predict(TensorCall(dict(inputs), signature_name, names))
        else:
            outputs = predictor.predict_tensors(  # type: ignore[attr-defined]
                inputs, signature_name=signature_name, output_names=list(names) if names else None)
        parameters = {"signature_name": signature_name} if signature_name else {}
        return finish(emu, self.version, dict(inputs), parameters, outputs)  # type: ignore[no-any-return]

    def call(self, run: Callable[[], T], request: Any, parameters: dict[str, Any]) -> T:
        """A model call of the protocol's own that is never merged (TF Serving's classify and
        regress), with the same bookkeeping; `request` is what the request log records."""
        return finish(self.emu, self.version, request, parameters, run())  # type: ignore[no-any-return]
