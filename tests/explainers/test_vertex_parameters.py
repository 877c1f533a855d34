"""Vertex AI's ExplanationParameters as the explainers' Method (SmoothGrad, blurred baseline),
an explanationSpecOverride applied to a deployed model's spec, and the SmoothGrad and blur
functions themselves, as decision functions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from core.errors import InvalidArgument, Unimplemented
from explainers import gradient_options
from explainers.gradient_options import SmoothGrad
from explainers.vertex_parameters import apply_override, to_method

XRAI = "xraiAttribution"


def test_xrai_with_smooth_grad_and_a_blurred_baseline() -> None:
    method = to_method({XRAI: {"stepCount": 20, "blurBaselineConfig": {"maxBlurSigma": 1.5},
                               "smoothGradConfig": {"noisySampleCount": "4"}}, "topK": 1})
    assert (method.name, method.count, method.blur_sigma) == (XRAI, 20, 1.5)
    assert method.smooth_grad == SmoothGrad(4, 0.1)  # noiseSigma's documented default
    per_feature = to_method({"integratedGradientsAttribution": {"smoothGradConfig": {
        "featureNoiseSigma": {"noiseSigma": [{"name": "a", "sigma": 0.5}, {"name": "b"}]}}}})
    assert per_feature.count == 50 and per_feature.blur_sigma == 0.0
    assert per_feature.smooth_grad == SmoothGrad(3, None, (("a", 0.5), ("b", 0.1)))


@pytest.mark.parametrize(("params", "error", "words"), [
    ({XRAI: {"stepCount": 0}}, InvalidArgument, "stepCount must be an integer from 1 to 100"),
    ({XRAI: {"steps": 3}}, InvalidArgument, 'Unknown name "steps"'),
    ({XRAI: {"smoothGradConfig": {"noisySampleCount": 51}}}, InvalidArgument, "from 1 to 50"),
    ({XRAI: {"smoothGradConfig": {"noiseSigma": 0.1, "featureNoiseSigma": {}}}},
     InvalidArgument, "one of GradientNoiseSigma"),
    ({XRAI: {"blurBaselineConfig": {"maxBlurSigma": -1}}}, InvalidArgument, "at least 0"),
    ({"sampledShapleyAttribution": {"pathCount": 3, "smoothGradConfig": {}}},
     InvalidArgument, 'Unknown name "smoothGradConfig"'),
    ({XRAI: {}, "sampledShapleyAttribution": {}}, InvalidArgument, "exactly one of"),
    ({"examples": {"neighborCount": 3}}, Unimplemented, "Example-based explanations"),
    ({XRAI: {}, "topK": 3}, Unimplemented, "topK 3 is not implemented"),
    ({XRAI: {}, "outputIndices": [1]}, Unimplemented, "outputIndices is not implemented"),
])
def test_bad_or_unimplemented_parameters(params: dict[str, Any], error: type[Exception],
                                         words: str) -> None:
    with pytest.raises(error) as caught:
        to_method(params)
    assert words in str(caught.value)


SPEC = {"parameters": {XRAI: {"stepCount": 20}, "topK": 1},
        "metadata": {"inputs": {"image": {"inputTensorName": "image", "inputBaselines": [0.0]}},
                     "outputs": {"score": {"outputTensorName": "output_0"}}}}


def test_an_override_changes_fields_but_not_the_method() -> None:
    spec = apply_override(SPEC, {
        "parameters": {XRAI: {"blurBaselineConfig": {"maxBlurSigma": 2}}},
        "metadata": {"inputs": {"image": {"inputBaselines": [1.0]}}}})
    assert spec["parameters"] == {XRAI: {"stepCount": 20, "blurBaselineConfig": {
        "maxBlurSigma": 2}}, "topK": 1}
    assert spec["metadata"]["inputs"]["image"] == {"inputTensorName": "image",
                                                   "inputBaselines": [1.0]}
    assert spec["metadata"]["outputs"] == SPEC["metadata"]["outputs"]
    assert SPEC["parameters"][XRAI] == {"stepCount": 20}  # the deployed spec is left alone
    with pytest.raises(InvalidArgument, match="cannot change the attribution method"):
        apply_override(SPEC, {"parameters": {"sampledShapleyAttribution": {"pathCount": 2}}})
    with pytest.raises(InvalidArgument, match="names no input"):
        apply_override(SPEC, {"metadata": {"inputs": {"other": {"inputBaselines": [0]}}}})
    with pytest.raises(Unimplemented):
        apply_override(SPEC, {"examplesOverride": {"neighborCount": 2}})
    assert apply_override(SPEC, None) is SPEC


def test_smooth_grad_averages_gradients_of_noisy_points() -> None:
    """A step function's gradient is 0 or 1; at the step, half the noisy samples fall on each
    side, so the smoothed gradient there is about 0.5 where the plain one is 1. Noise is added
    only where the sigma is not 0."""
    def step(points: np.ndarray) -> np.ndarray:
        return (points >= 0).astype(np.float64)

    noise = gradient_options.sigmas(SmoothGrad(50, None, (("a", 1.0),)), ["a", "b"],
                                     [(1,), (2,)])
    assert noise.tolist() == [1.0, 0.0, 0.0]
    smoothed = gradient_options.smoothed(step, noise, 50, np.random.default_rng(0))
    grads = smoothed(np.zeros((200, 3)))
    assert grads.shape == (200, 3)
    assert 0.4 < grads[:, 0].mean() < 0.6
    assert (grads[:, 1:] == 1.0).all()
    again = gradient_options.smoothed(step, noise, 50, np.random.default_rng(0))
    assert np.array_equal(again(np.zeros((200, 3))), grads)  # the same draws, the same answer


def test_the_blurred_baseline_blurs_height_and_width_only() -> None:
    image = np.zeros((9, 9, 2))
    image[4, 4, 0] = 1.0
    blurred = gradient_options.blurred(image, 1.0)
    assert blurred.shape == image.shape
    assert blurred[4, 4, 0] < 1.0 and blurred[4, 5, 0] > 0.0  # spread to its neighbours
    assert (blurred[:, :, 1] == 0.0).all()  # not into the other channel
    assert blurred.sum() == pytest.approx(1.0)
