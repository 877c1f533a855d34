"""Vertex AI's ExplanationParameters (google/cloud/aiplatform/v1/explanation.proto, googleapis/
googleapis) as the explainers' Method, and a request's `explanationSpecOverride` applied to a
deployed model's ExplanationSpec.

  sampledShapleyAttribution {pathCount}                      [1, 50]
  integratedGradientsAttribution {stepCount, smoothGradConfig, blurBaselineConfig}   [1, 100]
  xraiAttribution {stepCount, smoothGradConfig, blurBaselineConfig}                   [1, 100]
  smoothGradConfig {noiseSigma | featureNoiseSigma {noiseSigma: [{name, sigma}]},
                    noisySampleCount [1, 50], default 3}
  blurBaselineConfig {maxBlurSigma}
  examples (example-based explanations): not implemented by mlemu (UNIMPLEMENTED)
  topK 1 (or unset), outputIndices unset: the predicted (argmax) output, their default; other
  values (explaining several outputs) are not implemented by mlemu (UNIMPLEMENTED)

The override's `parameters` replace fields of the deployed model's, "Note that the attribution
method cannot be changed"; its `metadata.inputs.{name}.inputBaselines` replace that input's
baselines (ExplanationSpecOverride, ExplanationMetadataOverride). A deployed model without an
ExplanationSpec takes a whole one from the override (an mlemu leniency).
"""

from __future__ import annotations

from typing import Any

from core.errors import InvalidArgument, Unimplemented
from explainers import config, gradient_options
from explainers.config import Method
from explainers.gradient_options import SmoothGrad

#: Vertex method -> its count field.
METHODS = {config.SAMPLED_SHAPLEY: "pathCount", config.INTEGRATED_GRADIENTS: "stepCount",
           config.XRAI: "stepCount"}
GRADIENT_FIELDS = ("smoothGradConfig", "blurBaselineConfig")
PARAMETER_FIELDS = (*METHODS, "examples", "topK", "outputIndices")
WHERE = "explanation_spec.parameters"


def _unknown(body: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    extra = sorted(set(body) - set(known))
    if extra:  # the words of Google's JSON parsing
        raise InvalidArgument(f'Invalid JSON payload received. Unknown name "{extra[0]}" at '
                              f"'{where}': Cannot find field.")


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be a JSON object.")
    return value


def _number(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidArgument(f"{where} must be a number of at least 0; got {value!r}.")
    return float(value)


def _count(value: Any, where: str, low: int, high: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)  # int32 fields may come as JSON strings
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{where} must be an integer from {low} to {high}; got {value!r}.")
    return value


def _smooth_grad(body: Any, where: str) -> SmoothGrad | None:
    if body is None:
        return None
    body = _object(body, where)
    _unknown(body, ("noiseSigma", "featureNoiseSigma", "noisySampleCount"), where)
    samples = _count(body.get("noisySampleCount"), f"{where}.noisySampleCount", 1,
                     gradient_options.MAX_SAMPLES, gradient_options.DEFAULT_SAMPLES)
    if body.get("featureNoiseSigma") is None:
        return SmoothGrad(samples, _number(body.get("noiseSigma"), f"{where}.noiseSigma",
                                           gradient_options.DEFAULT_NOISE_SIGMA))
    if body.get("noiseSigma") is not None:  # a oneof (GradientNoiseSigma)
        raise InvalidArgument(f"{where} sets both noiseSigma and featureNoiseSigma; they are "
                              "one of GradientNoiseSigma.")
    per = _object(body["featureNoiseSigma"], f"{where}.featureNoiseSigma")
    _unknown(per, ("noiseSigma",), f"{where}.featureNoiseSigma")
    entries = per.get("noiseSigma") or []
    if not isinstance(entries, list):
        raise InvalidArgument(f"{where}.featureNoiseSigma.noiseSigma must be a list.")
    sigmas = []
    for i, entry in enumerate(entries):
        at = f"{where}.featureNoiseSigma.noiseSigma[{i}]"
        entry = _object(entry, at)
        _unknown(entry, ("name", "sigma"), at)
        if not isinstance(entry.get("name"), str) or not entry["name"]:
            raise InvalidArgument(f"{at}.name must name an input of the explanation metadata.")
        sigmas.append((entry["name"], _number(entry.get("sigma"), f"{at}.sigma",
                                              gradient_options.DEFAULT_NOISE_SIGMA)))
    return SmoothGrad(samples, None, tuple(sigmas))


def _chosen(params: dict[str, Any], where: str) -> str:
    if params.get("examples") is not None:
        raise Unimplemented("Example-based explanations (explanation_spec.parameters.examples) "
                            "are not implemented by mlemu; use a feature attribution method.")
    chosen = [name for name in METHODS if params.get(name) is not None]
    if len(chosen) != 1:
        raise InvalidArgument(f"{where} must set exactly one of {', '.join(METHODS)}.")
    return chosen[0]


def _one_output(params: dict[str, Any], where: str) -> None:
    """mlemu explains the output the model predicts (ExplanationParameters: "If neither top_k
    nor output_indices is populated, returns the argmax index of the outputs")."""
    top_k = params.get("topK")
    if top_k not in (None, 0, 1, "0", "1"):
        raise Unimplemented(f"{where}.topK {top_k!r} is not implemented by mlemu: it explains the "
                            "predicted output only (topK 1, the default).")
    if params.get("outputIndices"):
        raise Unimplemented(f"{where}.outputIndices is not implemented by mlemu: it explains the "
                            "predicted output only.")


def to_method(params: Any, where: str = WHERE) -> Method:
    """The Method of an ExplanationParameters object, validated."""
    if not isinstance(params, dict):
        raise InvalidArgument("explanation_spec.parameters must be set to explain.")
    _unknown(params, PARAMETER_FIELDS, where)
    _one_output(params, where)
    name = _chosen(params, where)
    at = f"{where}.{name}"
    body = _object(params[name], at)
    field = METHODS[name]
    if name == config.SAMPLED_SHAPLEY:
        _unknown(body, (field,), at)
    else:
        _unknown(body, (field, *GRADIENT_FIELDS), at)
    _, low, high = config.METHODS[name]
    method = Method(name, _count(body.get(field), f"{at}.{field}", low, high,
                                 config.DEFAULT_COUNT))
    if name == config.SAMPLED_SHAPLEY:
        return method
    blur = _object(body.get("blurBaselineConfig"), f"{at}.blurBaselineConfig")
    _unknown(blur, ("maxBlurSigma",), f"{at}.blurBaselineConfig")
    return Method(name, method.count, _smooth_grad(body.get("smoothGradConfig"),
                                                   f"{at}.smoothGradConfig"),
                  _number(blur.get("maxBlurSigma"), f"{at}.blurBaselineConfig.maxBlurSigma", 0.0))


def apply_override(spec: dict[str, Any], override: Any) -> dict[str, Any]:
    """The deployed model's ExplanationSpec with a request's ExplanationSpecOverride applied."""
    if not override:
        return spec
    if not isinstance(override, dict):
        raise InvalidArgument("explanationSpecOverride must be an object.")
    _unknown(override, ("parameters", "metadata", "examplesOverride"), "explanation_spec_override")
    if override.get("examplesOverride") is not None:
        raise Unimplemented("Example-based explanations (explanation_spec_override."
                            "examples_override) are not implemented by mlemu.")
    if not spec.get("parameters"):  # nothing deployed to override: the override is the spec
        return {**spec, **{k: v for k, v in override.items() if v}}
    out = dict(spec)
    given = _object(override.get("parameters"), "explanation_spec_override.parameters")
    if given:
        base = _object(spec.get("parameters"), WHERE)
        params = dict(base)
        method = next((name for name in METHODS if given.get(name) is not None), None)
        if method is not None:
            if base.get(method) is None:
                raise InvalidArgument("explanation_spec_override.parameters cannot change the "
                                      "attribution method of the deployed model's "
                                      "explanation_spec.")
            params[method] = {**_object(base[method], WHERE),
                              **_object(given[method], "explanation_spec_override.parameters")}
        params.update({k: v for k, v in given.items() if k not in METHODS})
        out["parameters"] = params
    meta = _object(override.get("metadata"), "explanation_spec_override.metadata")
    if meta:
        _unknown(meta, ("inputs",), "explanation_spec_override.metadata")
        current = dict(_object(spec.get("metadata"), "explanation_spec.metadata"))
        inputs = dict(_object(current.get("inputs"), "explanation_spec.metadata.inputs"))
        for name, body in _object(meta.get("inputs"), "explanation_spec_override.metadata.inputs"
                                  ).items():
            at = f"explanation_spec_override.metadata.inputs.{name}"
            body = _object(body, at)
            _unknown(body, ("inputBaselines",), at)
            if name not in inputs:
                raise InvalidArgument(f"{at} names no input of the deployed model's explanation "
                                      "metadata.")
            inputs[name] = {**_object(inputs[name], at), **body}
        out["metadata"] = {**current, "inputs": inputs}
    return out
