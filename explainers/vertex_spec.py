"""Vertex AI's ExplanationSpec (google/cloud/aiplatform/v1/explanation.proto and
explanation_metadata.proto, googleapis/googleapis) in the terms of the ml v1 explainers: its
`parameters` as an ml v1 explanationConfig, its inline `metadata` as the explanation_metadata.json
an ml v1 model directory holds, and the explainers' answer as Vertex AI's Explanation.

  parameters.sampledShapleyAttribution.pathCount       -> sampledShapleyAttribution.numPaths
  parameters.integratedGradientsAttribution.stepCount  -> integratedGradientsAttribution.numIntegralSteps
  parameters.xraiAttribution.stepCount                 -> xraiAttribution.numIntegralSteps
  metadata.inputs.{name}.{inputTensorName, inputBaselines, encoding, modality} (camelCase)
  metadata.outputs.{name}.{outputTensorName, indexDisplayNameMapping}
"""

from __future__ import annotations

from typing import Any

from core.errors import FailedPrecondition, InvalidArgument
from explainers import config, metadata

#: Vertex method -> (its count field, the ml v1 method it is).
METHODS = {"sampledShapleyAttribution": "pathCount", "integratedGradientsAttribution": "stepCount",
           "xraiAttribution": "stepCount"}
INPUT_FIELDS = {"inputTensorName": "input_tensor_name", "inputBaselines": "input_baselines",
                "encoding": "encoding", "modality": "modality", "groupName": "group_name",
                "encodedTensorName": "encoded_tensor_name"}


def to_config(spec: Any) -> dict[str, Any]:
    """The ml v1 explanationConfig of an ExplanationSpec's `parameters`."""
    if not isinstance(spec, dict) or not isinstance(spec.get("parameters"), dict):
        raise InvalidArgument("explanation_spec.parameters must be set to explain.")
    params = spec["parameters"]
    chosen = [name for name in METHODS if params.get(name) is not None]
    if len(chosen) != 1:
        raise InvalidArgument("explanation_spec.parameters must set exactly one of "
                              f"{', '.join(METHODS)}.")
    name = chosen[0]
    body = params[name] if isinstance(params[name], dict) else {}
    count = body.get(METHODS[name])
    field = config.METHODS[name][0]
    return {name: {} if count is None else {field: count}}


def to_metadata(spec: Any) -> metadata.Metadata:
    """The explainers' Metadata of an ExplanationSpec's inline `metadata`."""
    meta = spec.get("metadata") if isinstance(spec, dict) else None
    if not isinstance(meta, dict):
        raise InvalidArgument("explanation_spec.metadata must name the inputs and the output.")
    inputs = {name: ({INPUT_FIELDS.get(k, k): v for k, v in body.items()}
                     if isinstance(body, dict) else body)
              for name, body in (meta.get("inputs") or {}).items()}
    outputs = {}
    for name, body in (meta.get("outputs") or {}).items():
        body = body if isinstance(body, dict) else {}
        outputs[name] = {"output_tensor_name": body.get("outputTensorName"),
                         "index_name_mapping": body.get("indexDisplayNameMapping") or []}
    try:
        return metadata.parse({"inputs": inputs, "outputs": outputs})
    except FailedPrecondition as exc:  # worded for the ml v1 file; here it is the request's
        raise InvalidArgument(exc.message.replace(metadata.FILE_NAME,
                                                  "explanation_spec.metadata")) from None


def check(spec: Any, framework: str) -> None:
    """What deploying checks of a model's or deployed model's ExplanationSpec."""
    method = config.parse(to_config(spec), "explanation_spec.parameters")
    config.check_framework(method, framework)
    to_metadata(spec)


def to_explanation(entry: dict[str, Any]) -> dict[str, Any]:
    """One explained instance (`{"attributions_by_label": [...]}`) as a Vertex Explanation."""
    attributions = []
    for label in entry["attributions_by_label"]:
        item: dict[str, Any] = {
            "baselineOutputValue": label["baseline_score"],
            "instanceOutputValue": label["example_score"],
            "featureAttributions": label["attributions"],
            "outputIndex": [] if label["label_index"] < 0 else [label["label_index"]],
            "outputName": label["output_name"],
        }
        if "label_name" in label:
            item["outputDisplayName"] = label["label_name"]
        if "approx_error" in label:
            item["approximationError"] = label["approx_error"]
        attributions.append(item)
    return {"attributions": attributions}
