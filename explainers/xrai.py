"""XRAI: integrated gradients summed over image regions, regions ranked by attribution density.

Kapishnikov et al., "XRAI: Better Attributions Through Regions" (ICCV 2019, arXiv:1906.02825),
Algorithm 1: start from an empty selection; repeatedly add the candidate region (segments.py)
whose not-yet-selected pixels have the highest mean integrated-gradients attribution, and give
those pixels that mean; regions adding fewer than a minimum of new pixels are dropped; stop when
the whole image is covered or no candidate is left, and give the pixels never covered the mean of
their own attributions. The result ranks the image's areas: higher values mark the regions that
matter most to the explained output, which is what AI Platform's XRAI answered (the "using
feature attributions" guide: "XRAI assesses overlapping regions of the image to create a saliency
map, which highlights relevant regions of the image rather than pixels").
"""

from __future__ import annotations

import numpy as np

from explainers import segments

#: The paper's minimum of new pixels a region must add, at its 224 x 224 input.
MIN_PIXEL_DIFF = 50


def pixel_attributions(attributions: np.ndarray) -> np.ndarray:
    """Integrated gradients of an image [height, width(, channels)] summed per pixel."""
    return attributions.sum(axis=2) if attributions.ndim == 3 else attributions


def rank_regions(pixels: np.ndarray, masks: list[np.ndarray]) -> np.ndarray:
    """Per-pixel region scores [height, width] from per-pixel attributions and candidate masks.

    Each step needs every candidate's count and attribution sum over the pixels not yet
    covered; they are kept up to date from a sparse masks x pixels incidence matrix, so a step
    costs what the pixels it covers touch rather than a pass over every mask (an image of
    224 x 224 has about a thousand candidates)."""
    from scipy import sparse

    height, width = pixels.shape
    flat = pixels.reshape(-1).astype(np.float64)
    min_new = max(1, round(MIN_PIXEL_DIFF * height * width / segments.REFERENCE_SIDE ** 2))
    scores = np.full(flat.shape, np.nan)
    if not masks:
        return np.full(pixels.shape, float(flat.mean()))
    incidence = sparse.csr_matrix(np.stack([m.reshape(-1) for m in masks]).astype(np.float64))
    by_pixel = incidence.tocsc()
    counts = np.asarray(incidence.sum(axis=1)).reshape(-1)
    sums = incidence @ flat
    alive = counts >= min_new
    covered = np.zeros(flat.shape, dtype=bool)
    while alive.any() and not covered.all():
        gains = np.where(alive, sums / np.maximum(counts, 1), -np.inf)
        best = int(np.argmax(gains))
        new = np.flatnonzero(masks[best].reshape(-1) & ~covered)
        scores[new] = gains[best]
        covered[new] = True
        touched = by_pixel[:, new]
        counts -= np.asarray(touched.sum(axis=1)).reshape(-1)
        sums -= touched @ flat[new]
        alive &= counts >= min_new  # adds too little from now on: never a candidate again
        alive[best] = False
    left = np.isnan(scores)
    if left.any():
        scores[left] = float(flat[left].mean())
    return scores.reshape(pixels.shape)


def xrai(image: np.ndarray, attributions: np.ndarray) -> np.ndarray:
    """The XRAI map of an image [height, width(, channels)] given its integrated gradients (same
    shape), in the image's shape: each pixel's region score, repeated over its channels."""
    scores = rank_regions(pixel_attributions(attributions), segments.candidate_masks(image))
    if image.ndim == 3:
        return np.repeat(scores[:, :, None], image.shape[2], axis=2)
    return scores
