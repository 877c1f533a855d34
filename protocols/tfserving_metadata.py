"""TF Serving's GetModelMetadata body, and how non-TensorFlow models look through TF Serving.

A TensorFlow model reports its SignatureDefs as the real server prints them (proto JSON with proto
field names, defaults included, in the printer's layout: tensorflow_serving/model_servers/
http_rest_api_util.cc ToJsonString; bytes from protocols/tfserving_json.py). Other frameworks have
one `serving_default` predict signature built from their
predictors.base.Signature, so clients that read metadata first work with every model.
"""

from __future__ import annotations

from typing import Any

from core.errors import InvalidArgument
from predictors.base import Predictor, TensorSpec
from predictors.tensorflow import DEFAULT_SIGNATURE, PREDICT_METHOD, V2_DATATYPES, TensorFlowPredictor
from protocols.tfserving_json import metadata_text, proto_message
from protocols.tfserving_versions import number_of
from registry.resources import Version

_TF_DATATYPES = {v2: tf for tf, v2 in V2_DATATYPES.items()}


def _tensor_json(spec: TensorSpec) -> dict[str, Any]:
    return {
        "dtype": _TF_DATATYPES.get(spec.datatype, "DT_INVALID"),
        "tensor_shape": {"dim": [{"size": str(d), "name": ""} for d in spec.shape],
                         "unknown_rank": False},
        "name": spec.name,
    }


def _signature_defs(predictor: Predictor) -> dict[str, Any]:
    if isinstance(predictor, TensorFlowPredictor):
        return {name: proto_message(sig) for name, sig in predictor.signature_defs().items()}
    sig = predictor.signature()
    return {DEFAULT_SIGNATURE: {
        "inputs": {s.name: _tensor_json(s) for s in sig.inputs},
        "outputs": {s.name: _tensor_json(s) for s in sig.outputs},
        "method_name": PREDICT_METHOD,
        "defaults": {},
    }}


def metadata(model: str, version: Version, predictor: Predictor) -> bytes:
    """The GetModelMetadataResponse body, as TF Serving writes it."""
    spec: dict[str, Any] = {"name": model, "signature_name": ""}
    number = number_of(version)
    if number is not None:
        spec["version"] = str(number)
    return metadata_text(spec, _signature_defs(predictor)).encode()


def check_signature(predictor: Predictor, signature_name: str | None) -> None:
    """Non-TensorFlow models have `serving_default` only."""
    if signature_name not in (None, "", DEFAULT_SIGNATURE):
        raise InvalidArgument(f'Serving signature name: "{signature_name}" not found in signature def. '
                              f"This {predictor.framework or 'custom'} model has only "
                              f"{DEFAULT_SIGNATURE}.")


def single_input(inputs: Any) -> Any:
    """Columnar `inputs` for a one-input model: the value itself, or an object of one name."""
    if isinstance(inputs, dict) and not (len(inputs) == 1 and "b64" in inputs):
        if len(inputs) != 1:
            raise InvalidArgument("inputs is an object of several named inputs, but this model takes "
                                  "one input: send 'inputs' as a list (a batch of instances).")
        inputs = next(iter(inputs.values()))
    if not isinstance(inputs, list):
        raise InvalidArgument("Expecting 'inputs' to be a list/array: the batch of instances.")
    if not inputs:
        raise InvalidArgument("No values in 'inputs' array")
    return inputs
