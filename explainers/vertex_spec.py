"""Vertex AI's ExplanationSpec (google/cloud/aiplatform/v1/explanation.proto and
explanation_metadata.proto, googleapis/googleapis) in the terms of the ml v1 explainers: its
`parameters` as the explainers' Method (an ml v1 method and its count), its inline `metadata`
as the explanation_metadata.json an ml v1 model directory holds, and the explainers' answer as
Vertex AI's Explanation.

  parameters.sampledShapleyAttribution.pathCount       -> sampledShapleyAttribution.numPaths
  parameters.integratedGradientsAttribution.stepCount  -> integratedGradientsAttribution.numIntegralSteps
  parameters.xraiAttribution.stepCount                 -> xraiAttribution.numIntegralSteps
  (with SmoothGrad and the blurred baseline of the gradient methods: vertex_parameters.py)
  metadata.inputs.{name}.{inputTensorName, inputBaselines, encoding, modality} (camelCase)
  metadata.outputs.{name}.{outputTensorName, indexDisplayNameMapping}
"""

from __future__ import annotations

from typing import Any

from core.errors import FailedPrecondition, InvalidArgument
from explainers import config, metadata, vertex_parameters
from explainers.config import Method

INPUT_FIELDS = {"inputTensorName": "input_tensor_name", "inputBaselines": "input_baselines",
                "encoding": "encoding", "modality": "modality", "groupName": "group_name",
                "encodedTensorName": "encoded_tensor_name"}


def to_method(spec: Any) -> Method:
    """The explainers' Method of an ExplanationSpec's `parameters` (vertex_parameters.py)."""
    if not isinstance(spec, dict):
        raise InvalidArgument("explanation_spec.parameters must be set to explain.")
    return vertex_parameters.to_method(spec.get("parameters"))


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
    config.check_framework(to_method(spec), framework)
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
