"""XRAI (issue 34, item 2): integrated gradients ranked over image regions
(Kapishnikov et al. 2019, arXiv:1906.02825), on a small image model built here, through ml v1's
`:explain`; and its parts (segmentation, region ranking) as decision functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.settings import Settings
from explainers import segments, xrai
from tests.kit import modelkit

P = "projects/p"
SIDE = 12


def test_segmentation_finds_the_regions_of_a_two_tone_image() -> None:
    image = np.zeros((SIDE, SIDE, 3))
    image[:, SIDE // 2:] = 1.0
    labels = segments.felzenszwalb(image, scale=1.0, sigma=0.0, min_size=4)
    assert labels.max() == 1  # two segments, split where the tone changes
    assert len(set(labels[:, :SIDE // 2].ravel())) == 1
    assert labels[0, 0] != labels[0, -1]


def test_regions_are_ranked_by_the_mean_attribution_of_their_new_pixels() -> None:
    pixels = np.zeros((SIDE, SIDE))
    pixels[:4, :4] = 3.0   # dense and strong
    pixels[8:, 8:] = 1.0   # weaker
    corner, other, everything = (np.zeros((SIDE, SIDE), bool) for _ in range(3))
    corner[:4, :4], other[8:, 8:], everything[:] = True, True, True
    scores = xrai.rank_regions(pixels, [everything, other, corner])
    assert scores[0, 0] == 3.0 and scores[-1, -1] == 1.0
    # what `everything` adds last has its own pixels' mean
    assert scores[6, 0] == pytest.approx(0.0)
    assert np.isfinite(scores).all()


def image_model(directory: Path) -> None:
    """score = sum of the top-left 6 x 6 block of a [12, 12, 3] image: a linear model, so
    integrated gradients from a black baseline are exactly the block's pixel values."""
    import tensorflow as tf

    class Block(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, SIDE, SIDE, 3], tf.float32)])
        def serve(self, image: Any) -> dict[str, Any]:
            return {"score": tf.reduce_sum(image[:, :SIDE // 2, :SIDE // 2, :], axis=[1, 2, 3])}

    module = Block()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
    (directory / "explanation_metadata.json").write_text(json.dumps({
        "inputs": {"image": {"input_tensor_name": "image", "modality": "image"}},
        "outputs": {"score": {"output_tensor_name": "score"}}, "framework": "tensorflow2"}))


@pytest.mark.slow
def test_xrai_highlights_the_region_the_model_reads(tmp_path: Path) -> None:
    from app import create_app

    image_model(tmp_path / "model")
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"img": {"versions": {"v1": {
        "deploymentUri": str(tmp_path / "model"), "framework": "TENSORFLOW",
        "explanationConfig": {"xraiAttribution": {"numIntegralSteps": 20}}}}}})
    client = create_app(Settings(state_dir=tmp_path / "state", config_file=config,
                                 default_project="p"), warm=False).test_client()
    rng = np.random.default_rng(3)
    image = rng.uniform(0.0, 0.3, size=(SIDE, SIDE, 3))
    image[:SIDE // 2, :SIDE // 2] += 0.6  # the block the model sums is also the bright one
    response = client.post(f"/v1/{P}/models/img:explain",
                           data=json.dumps({"instances": [{"image": image.tolist()}]}),
                           content_type="application/json")
    assert response.status_code == 200, response.get_data(as_text=True)
    [entry] = json.loads(response.data)["explanations"][0]["attributions_by_label"]
    assert (entry["output_name"], entry["label_index"]) == ("score", -1)
    assert entry["example_score"] == pytest.approx(image[:6, :6].sum(), rel=1e-5)
    assert entry["baseline_score"] == pytest.approx(0.0)
    assert entry["approx_error"] == pytest.approx(0.0, abs=1e-4)  # the gradients are exact
    ranked = np.asarray(entry["attributions"]["image"])
    assert ranked.shape == (SIDE, SIDE, 3)
    assert (ranked == ranked[:, :, :1]).all()  # one score per pixel, over its channels
    inside, outside = ranked[:SIDE // 2, :SIDE // 2, 0], ranked[SIDE // 2:, SIDE // 2:, 0]
    assert inside.mean() > outside.max()  # the block's region ranks above the far corner
    assert ranked[0, 0, 0] == ranked.max()
