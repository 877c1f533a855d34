"""Model resolution, readiness, metadata and tensor inference shared by the V2 and grps adapters.

Both protocols name models without a project: they use the configured default project
(settings.default_project, MLEMU_PROJECT), and a protocol's model version is the ml v1 version
id (empty: the model's default version). Everything goes through the data plane (inference
through `dataplane.serve` and its `Served`, so batching, lastUseTime and the request log are
the same as for AI Platform's :predict; metadata through `dataplane.resolve`), so
permissions and version resolution match AI Platform's :predict: `ml.models.predict` /
`ml.versions.predict` for inference, `ml.models.get` / `ml.versions.get` for metadata and
model readiness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import dataplane
from core.errors import ApiError, Code, InvalidArgument, ModelNotFound, NotFound
from core.payloads import Caller, ModelRef
from protocols.tensors import Tensor, from_predictions, to_array, to_instances

if TYPE_CHECKING:
    from emulator import Emulator
    from predictors.base import Predictor
    from registry.resources import Version

SERVER_NAME = "mlemu"
SERVER_VERSION = "0.1.0"
#: V2 protocol extensions served (GET /v2, ServerMetadata).
EXTENSIONS = ["binary_tensor_data"]
#: Version.framework -> the V2 `platform` string. Only names of the protocol's `<project>_<format>`
#: list (kserve/kserve docs/predict-api/v2/required_api.md, "Platforms"; seed 002) are used;
#: every other framework answers "" as KServe does for all its models
#: (python/kserve/kserve/protocol/dataplane.py, model_metadata: `"platform": ""`).
PLATFORMS = {"TENSORFLOW": "tensorflow_savedmodel"}
#: Request parameters that steer the protocol, never passed to a predictor.
PROTOCOL_PARAMETERS = frozenset({"binary_data_output", "binary_data", "binary_data_size",
                                 "signature_name"})


def model_ref(emu: Emulator, name: str, version: str | None) -> ModelRef:
    if not name:
        raise InvalidArgument("A model name is required.")
    return ModelRef(emu.settings.default_project, name, version or None)


def v2_error(exc: ApiError) -> ApiError:
    """An error as V2 servers word it, over REST and gRPC alike. A missing model is KServe's
    "Model with name m does not exist." (python/kserve/kserve/errors.py ModelNotFound: HTTP 404,
    gRPC NOT_FOUND); KServe serves no versions, so a missing version is Triton's "Request for
    unknown model: 'm' version v is not found" (triton core model_repository_manager.cc)."""
    if not isinstance(exc, ModelNotFound):
        return exc
    if exc.version is None:
        return NotFound(f"Model with name {exc.model} does not exist.")
    return NotFound(f"Request for unknown model: '{exc.model}' version {exc.version} is not found")


def version_id(version: Version) -> str:
    return version.name.rsplit("/", 1)[-1]


def get_model(emu: Emulator, caller: Caller, name: str, version: str | None) -> tuple[Version, Predictor]:
    """The serving version and its loaded predictor, for metadata and readiness."""
    ref = model_ref(emu, name, version)
    permission = "ml.versions.get" if ref.version else "ml.models.get"
    return dataplane.resolve(emu, caller, ref, permission)


def model_ready(emu: Emulator, caller: Caller, name: str, version: str | None) -> bool:
    """True when the version exists, is READY and its model loads; NotFound propagates, over
    REST (404) and gRPC (NOT_FOUND) alike, as in KServe (protocol/dataplane.py model_ready raises
    ModelNotFound for both transports). Triton differs per transport (HTTP 400 "Model version
    not ready", gRPC ready=false), so the transports follow KServe, whose protocol V2 is."""
    try:
        get_model(emu, caller, name, version)
    except ApiError as exc:
        if exc.code is Code.FAILED_PRECONDITION:  # not READY, or the model failed to load
            return False
        raise
    return True


def server_ready(emu: Emulator) -> bool:
    """Warm-up reached readiness and every READY bootstrap version readiness waits for is loaded
    in this process (or was, and a cap on loaded versions unloaded it: it reloads on demand)."""
    if not emu.is_ready():
        return False
    for name in emu.ready_versions():
        version = emu.store.get_version(name)
        if version is not None and version.state == "READY" and not emu.deployments.serves(version):
            return False
    return True


def platform(predictor: Predictor) -> str:
    return PLATFORMS.get(predictor.framework, "")


def metadata(emu: Emulator, caller: Caller, name: str, version: str | None) -> dict[str, Any]:
    """V2 model metadata: name, versions, platform, inputs and outputs from the signature."""
    return describe(emu, *get_model(emu, caller, name, version))


def describe(emu: Emulator, served: Version, predictor: Predictor) -> dict[str, Any]:
    model_name = served.name.rsplit("/versions/", 1)[0]
    versions = [version_id(v) for v in emu.store.list_versions(model_name) if v.state == "READY"]
    signature = predictor.signature()
    return {
        "name": model_name.rsplit("/", 1)[-1],
        "versions": versions,
        "platform": platform(predictor),
        "inputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                   for t in signature.inputs],
        "outputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                    for t in signature.outputs],
    }


def predictor_kwargs(predictor: Predictor, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Request parameters a predictor accepts (custom code: all but the protocol's own)."""
    accepted = predictor.accepted_parameters
    return {k: v for k, v in parameters.items()
            if k not in PROTOCOL_PARAMETERS and (accepted is None or k in accepted)}


def as_list(predictions: Any) -> list[Any]:
    if isinstance(predictions, list):
        return predictions
    if hasattr(predictions, "tolist"):
        result = predictions.tolist()
        return result if isinstance(result, list) else [result]
    if isinstance(predictions, (str, bytes, dict)) or not isinstance(predictions, Iterable):
        return [predictions]
    return list(predictions)  # a custom predictor may yield its predictions


def serve(emu: Emulator, caller: Caller, name: str, version: str | None) -> dataplane.Served:
    """The model a V2 or grps inference names, resolved by the data plane for prediction."""
    return dataplane.serve(emu, caller, model_ref(emu, name, version))


def run_tensors(served: dataplane.Served, inputs: list[Tensor], parameters: Mapping[str, Any],
                output_names: list[str] | None = None) -> list[Tensor]:
    """Output tensors for input tensors, through the data plane: columnar when the predictor
    takes tensors (a TensorFlow signature), else as instances (numpy rows where it takes them)."""
    predictor = served.predictor
    declared = {t.name: t.datatype for t in predictor.signature().outputs}
    if callable(getattr(predictor, "predict_tensors", None)):
        result = served.predict_tensors({t.name: t.data for t in inputs},
                                        signature_name=parameters.get("signature_name"),
                                        output_names=output_names)
        return [Tensor(name, *_typed(array, declared.get(name))) for name, array in result.items()]
    predictions = served.predict(instances_for(predictor, inputs),
                                 predictor_kwargs(predictor, parameters))
    return from_predictions(as_list(predictions), declared)


def instances_for(predictor: Predictor, inputs: list[Tensor]) -> Any:
    """The instances of protocols/tensors.py. A predictor that takes arrays (scikit-learn,
    XGBoost: `Predictor.takes_arrays`) given one numeric tensor gets the array itself: its rows
    are the instances, so this skips a round trip through Python lists, the dominant cost of a
    large tensor (bench/RESULTS.md, "V2 and grps tensors as arrays"). Custom code always gets
    lists, as on AI Platform."""
    if (predictor.takes_arrays and len(inputs) == 1 and inputs[0].data.ndim >= 1
            and inputs[0].data.dtype.kind in "biuf"):
        return inputs[0].data
    return to_instances(inputs)


def _typed(array: Any, datatype: str | None) -> tuple[str, Any]:
    data, dtype = to_array(np.asarray(array), datatype)
    return dtype, data


def select_outputs(outputs: list[Tensor], requested: list[str] | None) -> list[Tensor]:
    """The requested outputs in the requested order (all, in model order, when none named)."""
    if not requested:
        return outputs
    by_name = {t.name: t for t in outputs}
    unknown = [name for name in requested if name not in by_name]
    if unknown:
        raise InvalidArgument(
            f"unknown output name(s) {', '.join(map(repr, unknown))}; the model produces "
            f"{', '.join(map(repr, by_name))}."
        )
    return [by_name[name] for name in requested]
