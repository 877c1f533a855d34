"""Vertex AI explain with XRAI on a TensorFlow image model, through google-cloud-aiplatform
unmodified: a Keras model exported for serving, uploaded with an explanationSpec
(`xraiAttribution`), deployed, and explained with `Endpoint.explain`; a request's
explanationSpecOverride (SmoothGrad, a blurred baseline) through the GAPIC REST client; the
GAPIC gRPC client reaching the same answer; and what mlemu does not implement answered as such.

The model sums the top-left 6 x 6 block of a 12 x 12 x 3 image (tests/kit/tfmodels.py), so its
score, its integrated gradients and a blurred baseline's score are known exactly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.conftest import LiveServer
from tests.kit import vertexkit

pytestmark = pytest.mark.slow
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
SIDE, HALF = 12, 6


def _image() -> np.ndarray:
    rng = np.random.default_rng(3)
    image = rng.uniform(0.0, 0.3, size=(SIDE, SIDE, 3))
    image[:HALF, :HALF] += 0.6  # the block the model sums is also the bright one
    return image


@pytest.fixture(scope="module")
def endpoint(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[LiveServer, Any]]:
    from google.cloud.aiplatform import explain

    from tests.kit import tfmodels

    base = tmp_path_factory.mktemp("vertex-xrai")
    tfmodels.keras_image_model(base / "image", SIDE)
    with vertexkit.sdk_server(gcs_emulator, base, "vertex-xrai") as (server, aiplatform):
        model = aiplatform.Model.upload(
            display_name="image", artifact_uri=str(base / "image"),
            serving_container_image_uri=IMAGE,
            explanation_metadata=explain.ExplanationMetadata(
                inputs={"image": {"input_tensor_name": "image", "modality": "image"}},
                outputs={"score": {"output_tensor_name": "output_0"}}),
            explanation_parameters=explain.ExplanationParameters(
                {"xrai_attribution": {"step_count": 20}}))
        yield server, model.deploy(machine_type="n1-standard-2")


def _map(attribution: Any) -> np.ndarray:
    """An Attribution's image map as an array (a protobuf Value of nested lists)."""
    from google.protobuf import json_format

    value = json_format.MessageToDict(type(attribution).pb(attribution))["featureAttributions"]
    return np.asarray(value["image"], dtype=np.float64)


def _request(deployed: Any, override: dict[str, Any]) -> Any:
    """An ExplainRequest of the test image with `override` (the instances added as the GAPIC
    client's flattened `instances` argument adds them)."""
    from google.cloud import aiplatform_v1

    request = aiplatform_v1.ExplainRequest(endpoint=deployed.resource_name,
                                           explanation_spec_override=override)
    request.instances.extend([{"image": _image().tolist()}])
    return request


def test_xrai_ranks_the_region_the_model_reads(endpoint: tuple[LiveServer, Any]) -> None:
    _, deployed = endpoint
    image = _image()
    answer = deployed.explain(instances=[{"image": image.tolist()}])
    [explanation] = answer.explanations
    [attribution] = explanation.attributions
    scores = _map(attribution)
    assert scores.shape == image.shape  # one score per pixel, repeated over its channels
    assert np.ptp(scores) > 0
    assert scores[:HALF, :HALF].mean() > scores[HALF:, HALF:].mean()
    assert attribution.instance_output_value == pytest.approx(image[:HALF, :HALF].sum(), rel=1e-5)
    assert attribution.baseline_output_value == pytest.approx(0.0, abs=1e-6)  # a black image
    assert list(attribution.output_index) == [0] and attribution.output_name == "score"
    assert attribution.approximation_error == pytest.approx(0.0, abs=1e-4)  # linear model
    assert answer.predictions[0] == pytest.approx([image[:HALF, :HALF].sum()], rel=1e-5)
    again = deployed.explain(instances=[{"image": image.tolist()}])
    assert np.array_equal(_map(again.explanations[0].attributions[0]), scores)


def test_the_override_blurs_the_baseline_and_smooths_the_gradients(
        endpoint: tuple[LiveServer, Any]) -> None:
    from scipy import ndimage

    _, deployed = endpoint
    image = _image()
    client = deployed._prediction_client

    def explain(xrai: dict[str, Any]) -> Any:
        answer = client.explain(request=_request(
            deployed, {"parameters": {"xrai_attribution": xrai}}))
        return answer.explanations[0].attributions[0]

    blurred = explain({"step_count": 20, "blur_baseline_config": {"max_blur_sigma": 2.0}})
    baseline = ndimage.gaussian_filter(image, sigma=(2.0, 2.0, 0.0), mode="nearest")
    assert blurred.baseline_output_value == pytest.approx(baseline[:HALF, :HALF].sum(), rel=1e-4)
    assert blurred.approximation_error == pytest.approx(0.0, abs=1e-3)
    assert _map(blurred).shape == image.shape
    # The gradients of a linear model are the same everywhere: SmoothGrad's noise leaves the
    # integrated gradients, hence the XRAI map, as they were.
    plain = _map(explain({"step_count": 20}))
    smooth = explain({"step_count": 20, "smooth_grad_config": {"noise_sigma": 0.2,
                                                               "noisy_sample_count": 4}})
    assert _map(smooth) == pytest.approx(plain, rel=1e-4, abs=1e-6)


def test_what_mlemu_does_not_implement_or_refuses(endpoint: tuple[LiveServer, Any]) -> None:
    from google.api_core import exceptions

    _, deployed = endpoint
    client = deployed._prediction_client

    def explain(override: dict[str, Any]) -> Any:
        return client.explain(request=_request(deployed, override))

    with pytest.raises(exceptions.BadRequest) as changed:  # "the attribution method cannot be
        explain({"parameters": {"integrated_gradients_attribution": {"step_count": 5}}})
    assert "cannot change the attribution method" in changed.value.message
    with pytest.raises(exceptions.BadRequest) as steps:
        explain({"parameters": {"xrai_attribution": {"step_count": 101}}})
    assert "stepCount must be an integer from 1 to 100" in steps.value.message
    with pytest.raises(exceptions.MethodNotImplemented) as examples:
        explain({"examples_override": {"neighbor_count": 3}})
    assert "Example-based explanations" in examples.value.message


def test_the_grpc_client_gets_the_same_explanation(endpoint: tuple[LiveServer, Any]) -> None:
    import grpc
    from google.cloud import aiplatform_v1
    from google.cloud.aiplatform_v1.services.prediction_service.transports import (
        PredictionServiceGrpcTransport,
    )

    server, deployed = endpoint
    instances = [{"image": _image().tolist()}]
    rest = deployed.explain(instances=instances).explanations[0].attributions[0]
    channel = grpc.insecure_channel(server.grpc_target)
    client = aiplatform_v1.PredictionServiceClient(
        transport=PredictionServiceGrpcTransport(channel=channel))
    answer = client.explain(endpoint=deployed.resource_name, instances=instances)
    [attribution] = answer.explanations[0].attributions
    assert _map(attribution) == pytest.approx(_map(rest), rel=1e-6)
    assert attribution.instance_output_value == pytest.approx(rest.instance_output_value)
    channel.close()
