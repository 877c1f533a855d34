"""`explanation_metadata.json` in the model directory: which inputs to explain, their baselines,
and which output to attribute.

The format is the one the AI Platform docs and the Explainable AI SDK write
(GoogleCloudPlatform/explainable_ai_sdk, explainable_ai_sdk/common/explain_metadata.py):

    {"inputs": {"<feature name>": {"input_tensor_name": "...", "input_baselines": [...],
                                   "encoding": "identity", "modality": "numeric", ...}},
     "outputs": {"<output name>": {"output_tensor_name": "...", "index_name_mapping": [...]}},
     "framework": "tensorflow"}

Attributions are keyed by the feature names, the response's `output_name` is the output's name.
An input with `index_feature_mapping` (required for the bag_of_features, bag_of_features_sparse and
indicator encodings, allowed for identity) is answered per mapped name instead: each name's
attribution is the list of the input's values at that index of its last axis (one value for a
vector input), the layout Google's tabular sample reads as `attributions[feature_name][0]`
(GoogleCloudPlatform/ai-platform-samples notebooks/samples/explanations/
ai-explanations-tabular.ipynb: "the service will return a key / value mapping of each feature
with its corresponding attribution value").
`input_tensor_name` names a graph tensor of the serving signature (`x:0`) or its alias (`x`); for
frameworks without tensors it names a key of dict instances, or is left out when the instance
itself (a row of numbers) is the one input. A baseline is a value of the input's shape or a scalar
(broadcast); several baselines are averaged; none means zeros. Fields this emulator does not act on
(domain, visualization, sparse tensor names, ...) are accepted and ignored; `group_name` and
`encoded_tensor_name` are refused, since honouring them silently wrong would mislead.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from core.errors import FailedPrecondition

FILE_NAME = "explanation_metadata.json"
ENCODINGS = ("identity", "bag_of_features", "bag_of_features_sparse", "indicator",
             "combined_embedding", "concat_embedding")
UNSUPPORTED_INPUT_FIELDS = ("group_name", "encoded_tensor_name", "encoded_baselines")


#: Encodings whose last axis is a bag of named features: index_feature_mapping is required
#: (explainable_ai_sdk common/explain_metadata.py, InputMetadata._validate_index_feature_mapping).
MAPPED_ENCODINGS = ("bag_of_features", "bag_of_features_sparse", "indicator")


@dataclasses.dataclass(frozen=True)
class InputMeta:
    name: str
    tensor_name: str | None
    baselines: tuple[Any, ...]  # empty: zeros
    modality: str = "numeric"
    #: The name of each index of the input's last axis: attributions are answered per name.
    index_feature_mapping: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class OutputMeta:
    name: str
    tensor_name: str | None
    index_name_mapping: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Metadata:
    inputs: tuple[InputMeta, ...]
    output: OutputMeta
    framework: str = ""


def _bad(message: str) -> FailedPrecondition:
    return FailedPrecondition(f"Invalid {FILE_NAME}: {message}")


def _input(name: str, body: Any) -> InputMeta:
    if not isinstance(body, dict):
        raise _bad(f"inputs.{name} must be an object.")
    for field in UNSUPPORTED_INPUT_FIELDS:
        if body.get(field):
            raise _bad(f"inputs.{name}.{field} is not supported by mlemu.")
    encoding = str(body.get("encoding", "identity")).lower()
    if encoding not in ENCODINGS:
        raise _bad(f"inputs.{name}.encoding {encoding!r} is not one of {', '.join(ENCODINGS)}.")
    baselines = body.get("input_baselines", [])
    if not isinstance(baselines, list):
        raise _bad(f"inputs.{name}.input_baselines must be a list of baselines.")
    tensor = body.get("input_tensor_name")
    if tensor is not None and not isinstance(tensor, str):
        raise _bad(f"inputs.{name}.input_tensor_name must be a string.")
    mapping = body.get("index_feature_mapping")
    if mapping is not None and (not isinstance(mapping, list)
                                or not all(isinstance(m, (str, int)) for m in mapping)):
        raise _bad(f"inputs.{name}.index_feature_mapping must be a list of feature names.")
    mapping = [str(m) for m in mapping or []]
    if len(set(mapping)) != len(mapping):
        raise _bad(f"inputs.{name}.index_feature_mapping contains duplicate features.")
    if not mapping and encoding in MAPPED_ENCODINGS:
        raise _bad(f"inputs.{name}.index_feature_mapping must be provided when encoding is "
                   f"{encoding}.")
    return InputMeta(name, tensor, tuple(baselines), str(body.get("modality", "numeric")),
                     tuple(mapping))


def parse(data: Any) -> Metadata:
    if not isinstance(data, dict):
        raise _bad("the file must hold a JSON object.")
    inputs, outputs = data.get("inputs"), data.get("outputs")
    if not isinstance(inputs, dict) or not inputs:
        raise _bad('"inputs" must map at least one feature name to its metadata.')
    if not isinstance(outputs, dict) or len(outputs) != 1:
        raise _bad('"outputs" must name exactly one output to explain.')
    (out_name, out_body), = outputs.items()
    if not isinstance(out_body, dict):
        raise _bad(f"outputs.{out_name} must be an object.")
    mapping = out_body.get("index_name_mapping") or []
    if not isinstance(mapping, list):
        raise _bad(f"outputs.{out_name}.index_name_mapping must be a list of names.")
    output = OutputMeta(out_name, out_body.get("output_tensor_name"), tuple(map(str, mapping)))
    return Metadata(tuple(_input(name, body) for name, body in inputs.items()), output,
                    str(data.get("framework", "")))


def load(model_dir: str) -> Metadata:
    """The model directory's metadata; FAILED_PRECONDITION if it is missing or malformed."""
    path = os.path.join(model_dir, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise FailedPrecondition(
            f"Explanations need the model's metadata: {FILE_NAME} was not found next to the "
            "model in deploymentUri.") from None
    except OSError as exc:  # its text names the server's path: only the reason goes out
        raise _bad(f"not readable ({exc.strerror or type(exc).__name__}).") from None
    except ValueError as exc:
        raise _bad(f"not readable JSON ({type(exc).__name__}: {exc}).") from None
    return parse(data)
