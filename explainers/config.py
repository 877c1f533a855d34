"""A version's `explanationConfig` (ml v1 ExplanationConfig): parsed, validated, and matched to
the frameworks that can run its method.

Exactly one method: `sampledShapleyAttribution {numPaths}`, `integratedGradientsAttribution
{numIntegralSteps}` or `xraiAttribution {numIntegralSteps}` (discovery document,
GoogleCloudMlV1__ExplanationConfig). The ranges are the service's: numPaths 1..50 and
numIntegralSteps 1..100 (the same fields in Vertex AI's ExplanationParameters, "Valid range of its
value is [1, 50]" / "[1, 100], inclusively"); an omitted number takes the documented starting
value, 50. Gradient methods need a differentiable TensorFlow model; sampled Shapley runs on any
predictor (the ml v1 reference: "There are three feature attribution methods supported for
TensorFlow models"; scikit-learn, XGBoost and custom code take sampled Shapley only).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core.errors import InvalidArgument
from explainers.gradient_options import SmoothGrad

SAMPLED_SHAPLEY = "sampledShapleyAttribution"
INTEGRATED_GRADIENTS = "integratedGradientsAttribution"
XRAI = "xraiAttribution"
#: method -> (its count field, the valid range)
METHODS = {
    SAMPLED_SHAPLEY: ("numPaths", 1, 50),
    INTEGRATED_GRADIENTS: ("numIntegralSteps", 1, 100),
    XRAI: ("numIntegralSteps", 1, 100),
}
DEFAULT_COUNT = 50
GRADIENT_METHODS = (INTEGRATED_GRADIENTS, XRAI)
TENSORFLOW = "TENSORFLOW"


@dataclasses.dataclass(frozen=True)
class Method:
    name: str  # one of METHODS
    count: int  # numPaths or numIntegralSteps
    #: Vertex AI's refinements of the gradient methods (explainers/gradient_options.py).
    smooth_grad: SmoothGrad | None = None
    blur_sigma: float = 0.0

    @property
    def uses_gradients(self) -> bool:
        return self.name in GRADIENT_METHODS


def parse(config: Any, where: str = "explanation_config") -> Method:
    """The one method an explanationConfig names; InvalidArgument (naming `where`) otherwise."""
    if not isinstance(config, dict):
        raise InvalidArgument(f"{where} must be a JSON object.")
    unknown = sorted(set(config) - set(METHODS))
    if unknown:
        raise InvalidArgument(f'Unknown name "{unknown[0]}" at \'{where}\': Cannot find field.')
    chosen = [name for name in METHODS if config.get(name) is not None]
    if len(chosen) != 1:
        raise InvalidArgument(f"{where} must set exactly one of {', '.join(METHODS)}; it sets "
                              f"{len(chosen)}.")
    name = chosen[0]
    body = config[name]
    field, low, high = METHODS[name]
    if not isinstance(body, dict) or set(body) - {field}:
        raise InvalidArgument(f"{where}.{name} takes only {field}.")
    count = body.get(field, DEFAULT_COUNT)
    if isinstance(count, str) and count.lstrip("-").isdigit():
        count = int(count)  # int32 fields may come as JSON strings
    if isinstance(count, bool) or not isinstance(count, int) or not low <= count <= high:
        raise InvalidArgument(f"{where}.{name}.{field} must be an integer from {low} to {high}; "
                              f"got {count!r}.")
    return Method(name, count)


def check_framework(method: Method, framework: str, any_framework: bool = True) -> None:
    """Refuse a gradient method for a model that is not TensorFlow ('' = custom code); with
    `any_framework` False, refuse every method for such a model, as AI Platform Prediction did:
    its explanations were for TensorFlow models (the discovery document's
    GoogleCloudMlV1__ExplanationConfig: "There are three feature attribution methods supported
    for TensorFlow models"; the "using feature attributions" guide: "AI Explanations ... for
    TensorFlow models"). Sampled Shapley on other frameworks is an mlemu extension."""
    if not any_framework and framework != TENSORFLOW:
        kind = framework or "custom prediction routine"
        raise InvalidArgument(
            f"AI Explanations explain TensorFlow models only; this is a {kind} model. Set "
            "MLEMU_EXPLAIN_ANY_FRAMEWORK=true to explain scikit-learn, XGBoost and custom "
            f"prediction routines with {SAMPLED_SHAPLEY} (an mlemu extension).")
    if method.uses_gradients and framework != TENSORFLOW:
        kind = framework or "custom prediction routine"
        raise InvalidArgument(
            f"{method.name} needs a differentiable TensorFlow model; a {kind} model can be "
            f"explained with {SAMPLED_SHAPLEY} only.")
