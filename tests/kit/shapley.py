"""Exact baseline Shapley values and the models and points the explanation tests compare
attributions on (tests/explainers)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np

X = [0.8, -1.2, 2.0]
BASELINE = [0.1, 0.3, -0.5]


def exact_shapley(f: Any, x: list[float], base: list[float]) -> np.ndarray:
    """Baseline Shapley values by enumerating every coalition."""
    n = len(x)
    values = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            for coalition in itertools.combinations(others, size):
                weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
                row = [x[j] if j in coalition else base[j] for j in range(n)]
                with_i = list(row)
                with_i[i] = x[i]
                values[i] += weight * (f(with_i) - f(row))
    return values


def sklearn_interactions(directory: Path) -> Any:
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 3))
    y = x[:, 0] * x[:, 1] + np.sin(x[:, 2]) + 0.5 * x[:, 0]
    model = GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(x, y)
    return model
