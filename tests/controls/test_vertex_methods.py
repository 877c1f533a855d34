"""Vertex AI management methods by name in the controls, through google-cloud-aiplatform
unmodified: the journal names `models.upload`, `endpoints.create`, `endpoints.deployModel` and the
operation polls; a rule on `endpoints.deployModel` makes `Model.deploy` raise what the service's
FAILED_PRECONDITION raises over REST; a 429 on `models.upload` carries Vertex AI's quota details;
a Vertex AI prediction fault over gRPC is journaled under the same names as over REST; timing
rules hold `Model.upload` until its operation was polled and fail `Model.deploy`'s operation."""

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
def vertex(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[LiveServer, Any, str]]:
    base = tmp_path_factory.mktemp("vertex-methods")
    modelkit.sklearn_model(base / "iris", kind="logreg")
    with vertexkit.sdk_server(gcs_emulator, base, "vertex-methods") as (server, aiplatform):
        yield server, aiplatform, str(base / "iris")


def _controls(server: LiveServer, verb: str, path: str, **kwargs: Any) -> Any:
    answer = requests.request(verb, f"{server.url}/_mlemu/{path}", timeout=60, **kwargs)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture()
def clean(vertex: tuple[LiveServer, Any, str]) -> tuple[LiveServer, Any, str]:
    server = vertex[0]
    _controls(server, "DELETE", "faults")
    _controls(server, "DELETE", "timing")
    _controls(server, "DELETE", "requests")
    return vertex


def test_the_journal_names_upload_and_deploy(clean: tuple[LiveServer, Any, str]) -> None:
    server, aiplatform, artifacts = clean
    model = aiplatform.Model.upload(display_name="named", artifact_uri=artifacts,
                                    serving_container_image_uri=IMAGE)
    endpoint = model.deploy(machine_type="n1-standard-2")
    assert len(endpoint.predict(instances=ROWS).predictions) == 2
    calls = _controls(server, "GET", "requests", params={"protocol": "aiplatform"})["requests"]
    methods = [c["method"] for c in calls]
    for method in ("models.upload", "endpoints.create", "endpoints.deployModel", "predict"):
        assert method in methods, methods
    assert methods.index("models.upload") < methods.index("endpoints.deployModel")
    assert "" not in methods  # every Vertex AI call the SDK made has a name
    [deploy] = [c for c in calls if c["method"] == "endpoints.deployModel"]
    assert deploy["status"] == 200 and deploy["project"] == "demo"
    assert deploy["endpoint"] == endpoint.resource_name.rsplit("/", 1)[1]
    # An operation's methods keep its resource's collection, under /v1/ and /ui/ alike (where
    # the SDK's REST transport polls an operation that is not done yet).
    _controls(server, "DELETE", "requests")
    listed = requests.get(f"{server.url}/v1/{endpoint.resource_name}/operations", timeout=60)
    [operation, *_] = listed.json()["operations"]
    assert requests.get(f"{server.url}/ui/{operation['name']}", timeout=60).status_code == 200
    location = endpoint.resource_name.rsplit("/endpoints/", 1)[0]
    requests.get(f"{server.url}/v1/{location}/operations", timeout=60).raise_for_status()
    calls = _controls(server, "GET", "requests")["requests"]
    assert [(c["method"], c.get("endpoint", "")) for c in calls] == [
        ("endpoints.operations.list", deploy["endpoint"]),
        ("endpoints.operations.get", deploy["endpoint"]), ("operations.list", "")]


def test_a_rule_on_deploy_fails_the_sdks_deploy(clean: tuple[LiveServer, Any, str]) -> None:
    from google.api_core import exceptions

    server, aiplatform, artifacts = clean
    model = aiplatform.Model.upload(display_name="refused", artifact_uri=artifacts,
                                    serving_container_image_uri=IMAGE)
    endpoint = aiplatform.Endpoint.create(display_name="refused")
    _controls(server, "POST", "faults", json={
        "match": {"protocol": "aiplatform", "method": "endpoints.deployModel"},
        "error": {"status": "FAILED_PRECONDITION", "message": "The model is not ready."},
        "times": 1})
    # Over REST, api_core raises by HTTP status: FAILED_PRECONDITION is a 400, BadRequest.
    with pytest.raises(exceptions.BadRequest) as caught:
        model.deploy(endpoint=endpoint, machine_type="n1-standard-2")
    assert "The model is not ready." in str(caught.value)
    assert caught.value.response.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert endpoint.list_models() == []  # the method never ran
    model.deploy(endpoint=endpoint, machine_type="n1-standard-2")  # `times` was 1
    assert len(endpoint.list_models()) == 1
    calls = _controls(server, "GET", "requests",
                      params={"method": "endpoints.deployModel"})["requests"]
    assert [c["status"] for c in calls] == [400, 200]


def test_a_quota_error_on_upload_names_vertex(clean: tuple[LiveServer, Any, str]) -> None:
    from google.api_core import exceptions

    server, aiplatform, artifacts = clean
    _controls(server, "POST", "faults", json={
        "match": {"method": "models.upload", "project": "demo"},
        "error": {"code": 429, "message": "Quota exceeded for resource management."},
        "times": 1})
    with pytest.raises(exceptions.TooManyRequests) as caught:
        aiplatform.Model.upload(display_name="quota", artifact_uri=artifacts,
                                serving_container_image_uri=IMAGE)
    assert caught.value.reason == "RATE_LIMIT_EXCEEDED"
    assert caught.value.domain == "googleapis.com"
    assert caught.value.metadata == {"service": "aiplatform.googleapis.com"}
    [rule] = _controls(server, "GET", "faults")["faults"]
    assert rule["hits"] == 1


def test_a_prediction_quota_error_over_grpc_is_journaled(
        clean: tuple[LiveServer, Any, str]) -> None:
    """The GAPIC gRPC client reaches the same rules, named `predict`, with Vertex AI's quota
    metric in the REST answer and the gRPC status RESOURCE_EXHAUSTED."""
    import grpc
    from google.api_core import exceptions
    from google.cloud import aiplatform_v1
    from google.cloud.aiplatform_v1.services.prediction_service.transports import (
        PredictionServiceGrpcTransport,
    )

    server, aiplatform, artifacts = clean
    model = aiplatform.Model.upload(display_name="grpc", artifact_uri=artifacts,
                                    serving_container_image_uri=IMAGE)
    endpoint = model.deploy(machine_type="n1-standard-2")
    endpoint_id = endpoint.resource_name.rsplit("/", 1)[1]
    _controls(server, "POST", "faults", json={
        "match": {"protocol": "aiplatform", "method": "predict", "endpoint": endpoint_id},
        "error": {"code": 429, "message": "Quota exceeded."}, "times": 2})
    with pytest.raises(exceptions.TooManyRequests) as rest:
        endpoint.predict(instances=ROWS)
    assert rest.value.metadata["quota_metric"] == (
        "aiplatform.googleapis.com/online_prediction_requests")
    channel = grpc.insecure_channel(server.grpc_target)
    client = aiplatform_v1.PredictionServiceClient(
        transport=PredictionServiceGrpcTransport(channel=channel))
    with pytest.raises(exceptions.ResourceExhausted):
        client.predict(endpoint=endpoint.resource_name, instances=ROWS)
    assert len(client.predict(endpoint=endpoint.resource_name, instances=ROWS).predictions) == 2
    calls = _controls(server, "GET", "requests",
                      params={"endpoint": endpoint_id, "method": "predict"})["requests"]
    assert [(c["transport"], c["method"], c["status"]) for c in calls] == [
        ("http", "predict", 429), ("grpc", "predict", "RESOURCE_EXHAUSTED"),
        ("grpc", "predict", "OK")]
    channel.close()


def test_timing_rules_hold_upload_and_fail_deploy(clean: tuple[LiveServer, Any, str]) -> None:
    from google.api_core import exceptions

    server, aiplatform, artifacts = clean
    _controls(server, "PUT", "timing", json={"operationType": "UPLOAD_MODEL",
                                             "after": {"polls": 2}})
    _controls(server, "PUT", "timing", json={"operationType": "DEPLOY_MODEL", "fail": {
        "code": "FAILED_PRECONDITION", "message": "No capacity for this machine type."}})
    model = aiplatform.Model.upload(display_name="held", artifact_uri=artifacts,
                                    serving_container_image_uri=IMAGE)
    assert model.display_name == "held" and model.version_id == "1"
    model_id = model.resource_name.rsplit("/", 1)[1]
    polls = _controls(server, "GET", "requests", params={
        "method": "models.operations.get", "model": model_id})["requests"]
    assert len(polls) >= 2  # the work starts only once the operation was polled twice
    endpoint = aiplatform.Endpoint.create(display_name="held")
    # The failed operation: api_core raises the exception of its google.rpc code.
    with pytest.raises(exceptions.FailedPrecondition) as caught:
        model.deploy(endpoint=endpoint, machine_type="n1-standard-2")
    assert "No capacity for this machine type." in str(caught.value)
    assert endpoint.list_models() == []
    # Held until polled: the runner loads and records the deployed model, then it serves.
    _controls(server, "PUT", "timing", json={"operationType": "DEPLOY_MODEL",
                                             "after": {"polls": 1}})
    model.deploy(endpoint=endpoint, machine_type="n1-standard-2")
    [deployed] = endpoint.list_models()
    answer = endpoint.predict(instances=ROWS)
    assert len(answer.predictions) == 2 and answer.deployed_model_id == deployed.id
    endpoint_id = endpoint.resource_name.rsplit("/", 1)[1]
    assert _controls(server, "GET", "requests", params={
        "method": "endpoints.operations.get", "endpoint": endpoint_id})["requests"]
    _controls(server, "DELETE", "timing")
    model.deploy(endpoint=endpoint, machine_type="n1-standard-2",  # no rule: done at once
                 traffic_percentage=50)
    assert len(endpoint.list_models()) == 2
