"""Image segmentations for XRAI: graph-based segmentation at several scales (no image library).

XRAI ranks regions of an image (Kapishnikov et al., "XRAI: Better Attributions Through Regions",
ICCV 2019, arXiv:1906.02825, section 3): its candidate regions are the segments of Felzenszwalb
and Huttenlocher's graph-based segmentation ("Efficient Graph-Based Image Segmentation", IJCV
2004) at several scales, each dilated a little so neighbouring regions overlap. The paper's
settings, for a 224 x 224 image: scales k = 50, 100, 150, 250, 500, 1200, smoothing sigma 0.8,
minimum segment 150 pixels, dilation radius 5; sizes here scale with the image's area (radius
with its side), so small images get proportionate regions.

The segmentation itself: pixels are nodes, 4-neighbours are joined by edges weighted by the
Euclidean distance of their (smoothed) values; edges are taken in increasing weight and two
components merge when the edge is no heavier than either one's internal difference (its
heaviest merged edge) plus k / its size. Components smaller than the minimum are then merged
into a neighbour along the lightest edges.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _ndimage() -> Any:
    """scipy.ndimage, imported when an image is explained (not when the server starts)."""
    from scipy import ndimage

    return ndimage

SCALES = (50.0, 100.0, 150.0, 250.0, 500.0, 1200.0)
SIGMA = 0.8
#: The paper's minimum segment and dilation radius at its 224 x 224 input.
REFERENCE_SIDE = 224
MIN_SIZE = 150
DILATION = 5


class _Components:
    """Union-find with each component's size and internal difference."""

    def __init__(self, count: int) -> None:
        self.parent = list(range(count))
        self.size = [1] * count
        self.internal = [0.0] * count

    def find(self, node: int) -> int:
        root = node
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[node] != root:  # path compression
            self.parent[node], node = root, self.parent[node]
        return root

    def join(self, a: int, b: int, weight: float) -> None:
        if self.size[a] < self.size[b]:
            a, b = b, a
        self.parent[b] = a
        self.size[a] += self.size[b]
        self.internal[a] = weight


def _edges(image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, first node, second node) of every 4-neighbour edge, lightest first."""
    height, width = image.shape[:2]
    index = np.arange(height * width).reshape(height, width)
    pairs = [(index[:, :-1], index[:, 1:], image[:, :-1] - image[:, 1:]),
             (index[:-1, :], index[1:, :], image[:-1, :] - image[1:, :])]
    first = np.concatenate([a.reshape(-1) for a, _, _ in pairs])
    second = np.concatenate([b.reshape(-1) for _, b, _ in pairs])
    weights = np.concatenate([np.sqrt(np.sum(d.reshape(d.shape[0] * d.shape[1], -1) ** 2, axis=1))
                              for _, _, d in pairs])
    order = np.argsort(weights, kind="stable")
    return weights[order], first[order], second[order]


def felzenszwalb(image: np.ndarray, scale: float, sigma: float, min_size: int) -> np.ndarray:
    """Segment labels [height, width] of an image [height, width(, channels)]."""
    image = np.asarray(image, dtype=np.float64)
    if image.ndim == 2:
        image = image[:, :, None]
    smooth = _ndimage().gaussian_filter(image, sigma=(sigma, sigma, 0)) if sigma > 0 else image
    height, width = image.shape[:2]
    weights, first, second = _edges(smooth)
    parts = _Components(height * width)
    for weight, a, b in zip(weights.tolist(), first.tolist(), second.tolist(), strict=True):
        ra, rb = parts.find(a), parts.find(b)
        if ra != rb and weight <= min(parts.internal[ra] + scale / parts.size[ra],
                                      parts.internal[rb] + scale / parts.size[rb]):
            parts.join(ra, rb, weight)
    for a, b in zip(first.tolist(), second.tolist(), strict=True):
        ra, rb = parts.find(a), parts.find(b)
        if ra != rb and (parts.size[ra] < min_size or parts.size[rb] < min_size):
            parts.join(ra, rb, max(parts.internal[ra], parts.internal[rb]))
    roots = np.array([parts.find(node) for node in range(height * width)])
    return np.unique(roots, return_inverse=True)[1].reshape(height, width)


def candidate_masks(image: np.ndarray) -> list[np.ndarray]:
    """The dilated segments of every scale, as boolean masks [height, width]."""
    height, width = image.shape[:2]
    area_ratio = height * width / REFERENCE_SIDE ** 2
    min_size = max(1, round(MIN_SIZE * area_ratio))
    radius = max(1, round(DILATION * min(height, width) / REFERENCE_SIDE))
    y, x = np.ogrid[-radius:radius + 1, -radius:radius + 1]
    disk = x * x + y * y <= radius * radius
    # The reference implementation segments the image rescaled to [-1, 1], with each scale k
    # taken per 255 of value range (as scikit-image's felzenszwalb reads `scale`).
    values = np.asarray(image, dtype=np.float64)
    low, high = float(values.min()), float(values.max())
    values = (values - low) / (high - low) * 2.0 - 1.0 if high > low else np.zeros_like(values)
    dilate = _ndimage().binary_dilation
    masks = []
    for scale in SCALES:
        labels = felzenszwalb(values, scale / 255.0, SIGMA, min_size)
        for label in range(int(labels.max()) + 1):
            masks.append(dilate(labels == label, structure=disk))
    return masks
