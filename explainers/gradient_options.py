"""Vertex AI's refinements of the gradient methods (integrated gradients, XRAI): SmoothGrad and
the blurred baseline (google/cloud/aiplatform/v1/explanation.proto, googleapis/googleapis:
IntegratedGradientsAttribution and XraiAttribution's `smooth_grad_config`, `blur_baseline_config`).

- SmoothGrad (Smilkov et al., arXiv:1706.03825): "the gradients are approximated by averaging the
  gradients from noisy samples in the vicinity of the inputs"; the noise is Gaussian with
  `noise_sigma` (every feature; default 0.1) or `feature_noise_sigma` (per named input; "No
  noise is added to features that are not set"), "added to the interpolated inputs prior to
  computing gradients", `noisy_sample_count` samples per point (1-50, default 3). The noise comes
  from the request's seeded generator, so the same request gets the same answer.
- Blurred baseline (BlurIG's motivation, Xu et al., arXiv:2004.03383): "a linear path from the
  maximally blurred image to the input image": the baseline is the image blurred by a Gaussian of
  `max_blur_sigma` pixels over its height and width (channels apart); 0 or unset keeps the
  metadata's baselines (zeros: a black image).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from explainers.gradients import Gradient

DEFAULT_NOISE_SIGMA = 0.1
DEFAULT_SAMPLES = 3
MAX_SAMPLES = 50


@dataclasses.dataclass(frozen=True)
class SmoothGrad:
    samples: int
    #: One sigma for every feature (None: per feature, below).
    sigma: float | None = DEFAULT_NOISE_SIGMA
    #: (input name, sigma) for the inputs noise is added to, when `sigma` is None.
    feature_sigmas: tuple[tuple[str, float], ...] = ()


def sigmas(smooth: SmoothGrad, names: list[str], shapes: list[tuple[int, ...]]) -> np.ndarray:
    """Each flat feature value's noise sigma, for inputs `names` of `shapes` (in layout order)."""
    per_input = dict(smooth.feature_sigmas)
    parts = [np.full(int(np.prod(shape)), smooth.sigma if smooth.sigma is not None
                     else per_input.get(name, 0.0), dtype=np.float64)
             for name, shape in zip(names, shapes, strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0)


def smoothed(gradient: Gradient, noise: np.ndarray, samples: int,
             rng: np.random.Generator) -> Gradient:
    """`gradient` averaged over `samples` noisy copies of each point (noise sigma per feature),
    all the copies in one model call."""
    def average(points: np.ndarray) -> np.ndarray:
        noisy = np.concatenate([points + rng.normal(size=points.shape) * noise
                                for _ in range(samples)])
        grads = np.asarray(gradient(noisy), dtype=np.float64)
        return np.asarray(grads.reshape(samples, len(points), -1).mean(axis=0))
    return average


def blurred(image: np.ndarray, sigma: float) -> np.ndarray:
    """`image` [height, width(, channels)] blurred over height and width by a Gaussian of
    `sigma` pixels (scipy.ndimage, imported when an image is explained)."""
    from scipy import ndimage

    spatial: Any = (sigma, sigma, 0.0) if image.ndim == 3 else sigma
    return np.asarray(ndimage.gaussian_filter(image.astype(np.float64), sigma=spatial,
                                              mode="nearest"))
