"""Sampled Shapley: the baseline Shapley value estimated from `num_paths` random feature orders.

For each sampled permutation of the features, the features are switched from their baseline value
to the instance's value one at a time in that order; a feature's marginal contribution is the
change of the model's score when it is switched. Averaged over permutations this estimates its
Shapley value (Strumbelj and Kononenko, https://arxiv.org/abs/1306.4265, the paper the ml v1
reference names). Along every permutation the contributions sum exactly to
score(instance) - score(baseline), so the estimate keeps completeness; its sampling error is
reported as `approx_error` (see `standard_error`). All paths of one instance go to the model as
one batch: num_paths * (features + 1) rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Seed of the permutation sampler: the same request gets the same attributions every time.
DEFAULT_SEED = 0
#: Model rows one instance may cost (num_paths * (features + 1) per baseline).
MAX_ROWS = 200_000

Scorer = Callable[[np.ndarray], np.ndarray]


def sampled_shapley(score: Scorer, x: np.ndarray, baseline: np.ndarray, num_paths: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """(attributions, per-feature standard errors or None) of `x` against `baseline`.

    `score` maps a batch of feature vectors (rows) to one score per row.
    """
    n = x.shape[0]
    orders = np.array([rng.permutation(n) for _ in range(num_paths)]).reshape(num_paths, n)
    # Row k of a path holds x on the first k features of its order, the baseline elsewhere.
    rows = np.repeat(baseline[None, None, :], num_paths, axis=0).repeat(n + 1, axis=1)
    for p in range(num_paths):
        for k, feature in enumerate(orders[p]):
            rows[p, k + 1:, feature] = x[feature]
    scores = np.asarray(score(rows.reshape(num_paths * (n + 1), n)), dtype=np.float64)
    steps = np.diff(scores.reshape(num_paths, n + 1), axis=1)  # contribution of orders[p][k]
    contributions = np.empty((num_paths, n))
    for p in range(num_paths):
        contributions[p, orders[p]] = steps[p]
    return contributions.mean(axis=0), standard_error(contributions)


def standard_error(contributions: np.ndarray) -> np.ndarray | None:
    """Standard error of each feature's mean contribution; None with a single path (one sample
    says nothing about the spread)."""
    paths = contributions.shape[0]
    if paths < 2:
        return None
    return np.asarray(contributions.std(axis=0, ddof=1) / np.sqrt(paths))
