"""Fault rules on Vertex AI predictions through google-cloud-aiplatform unmodified: a quota
error twice, then the prediction, with the SDK's GAPIC client retrying the 429 (the
generated PredictionService has no default retry for predict, so the caller passes Google's
api_core Retry, as Vertex AI's documentation advises for 429s); the journal names the endpoint
and the deployed model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.conftest import LiveServer
from tests.kit import modelkit, vertexkit

pytestmark = pytest.mark.slow
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"
ROWS = [[5.1, 3.5, 1.4, 0.2], [-1.0, 0.5, 2.0, -0.3]]


@pytest.fixture(scope="module")
def deployed(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[LiveServer, Any]]:
    base = tmp_path_factory.mktemp("vertex-faults")
    modelkit.sklearn_model(base / "iris", kind="logreg")
    with vertexkit.sdk_server(gcs_emulator, base, "vertex-faults") as (server, aiplatform):
        model = aiplatform.Model.upload(display_name="iris", artifact_uri=str(base / "iris"),
                                        serving_container_image_uri=IMAGE)
        yield server, model.deploy(machine_type="n1-standard-2")


def test_a_quota_error_twice_then_the_prediction(deployed: tuple[LiveServer, Any]) -> None:
    from google.api_core import exceptions, retry

    server, endpoint = deployed
    endpoint_id = endpoint.resource_name.rsplit("/", 1)[1]
    [deployed_model] = endpoint.list_models()
    rule = requests.post(f"{server.url}/_mlemu/faults", timeout=30, json={
        "match": {"endpoint": endpoint_id, "deployedModel": deployed_model.id},
        "error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded."},
        "times": 2})
    assert rule.status_code == 200, rule.text
    with pytest.raises(exceptions.TooManyRequests):  # what the SDK raises without a retry
        endpoint.predict(instances=ROWS)
    requests.delete(f"{server.url}/_mlemu/requests", timeout=30).raise_for_status()
    # Over REST a 429 is api_core's TooManyRequests (ResourceExhausted is its gRPC-side subclass).
    quota = retry.Retry(predicate=retry.if_exception_type(exceptions.TooManyRequests),
                        initial=0.1, maximum=0.5, timeout=60)
    answer = endpoint._prediction_client.predict(
        endpoint=endpoint.resource_name, instances=ROWS, retry=quota)
    assert len(answer.predictions) == 2 and answer.deployed_model_id == deployed_model.id
    calls = requests.get(f"{server.url}/_mlemu/requests", timeout=30,
                         params={"endpoint": endpoint_id}).json()["requests"]
    assert [c["status"] for c in calls] == [429, 200]
    assert {(c["deployedModel"], c["project"]) for c in calls} == {(deployed_model.id, "demo")}
    faults = requests.get(f"{server.url}/_mlemu/faults", timeout=30).json()["faults"]
    assert [f["hits"] for f in faults] == [2]
