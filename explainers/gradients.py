"""Integrated gradients (Sundararajan et al., https://arxiv.org/abs/1703.01365): the attribution
of feature i is (x_i - b_i) times the average gradient of the score along the straight path from
the baseline b to the instance x, approximated with `steps` midpoint samples (a Riemann sum).
The gradients come from the model itself (TensorFlow, predictors/tensorflow.py `gradients`); the
sum of the attributions approaches score(x) - score(b) as `steps` grows, and the remaining gap is
what `approx_error` reports.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: gradient(points) -> d score / d features, one row per point.
Gradient = Callable[[np.ndarray], np.ndarray]


def path_points(x: np.ndarray, baseline: np.ndarray, steps: int) -> np.ndarray:
    alphas = (np.arange(steps, dtype=np.float64) + 0.5) / steps
    return np.asarray(baseline[None, :] + alphas[:, None] * (x - baseline)[None, :])


def integrated_gradients(gradient: Gradient, x: np.ndarray, baseline: np.ndarray,
                         steps: int) -> np.ndarray:
    grads = np.asarray(gradient(path_points(x, baseline, steps)), dtype=np.float64)
    return np.asarray((x - baseline) * grads.mean(axis=0))
