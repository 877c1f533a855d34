"""Vertex AI through Google's own SDK, unmodified: google-cloud-aiplatform's REST transport
against a live server, local `artifact_uri`s staged by the SDK into a real Cloud Storage
emulator (gcp-storage-emulator, started by the tests) and read back by the server from
STORAGE_EMULATOR_HOST. Upload, versions and aliases, deploy with a traffic split, predict,
rawPredict, the service's refusals, operations, undeploy, delete, and state across a restart.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import requests

from tests.conftest import free_port, start_server, stop_server
from tests.kit import modelkit

pytestmark = pytest.mark.slow
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"
ROWS = [[5.1, 3.5, 1.4, 0.2], [-1.0, 0.5, 2.0, -0.3]]
LOCATION = "projects/demo/locations/us-central1"


def _init(url: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(project="demo", location="us-central1", api_endpoint=url,
                    api_transport="rest", credentials=AnonymousCredentials(),
                    staging_bucket="gs://vertex-staging")
    return aiplatform


@pytest.fixture(scope="module")
def env(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("vertex")
    gcs_emulator.client().create_bucket("vertex-staging")
    first = modelkit.sklearn_model(base / "first", kind="logreg", seed=0)
    second = modelkit.sklearn_model(base / "second", kind="linreg", seed=1)
    state = base / "state"
    environ = {"STORAGE_EMULATOR_HOST": gcs_emulator.host}
    server = start_server(state, env=environ, grpc_port=free_port())
    monkey = pytest.MonkeyPatch()
    monkey.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.host)  # the SDK stages through it
    shared = {"server": server, "base": base, "state": state, "env": environ,
              "first": first, "second": second}
    try:
        shared["aiplatform"] = _init(server.url)
        yield shared
    finally:
        monkey.undo()
        stop_server(shared["server"].proc)  # the restart test replaces it


def _expected(model: Any) -> list[Any]:
    return np.asarray(model.predict(np.asarray(ROWS))).tolist()  # type: ignore[no-any-return]


def test_upload_deploy_predict_split_undeploy_delete(env: dict[str, Any]) -> None:
    aiplatform = env["aiplatform"]
    model = aiplatform.Model.upload(display_name="iris", artifact_uri=str(env["base"] / "first"),
                                    serving_container_image_uri=IMAGE)
    assert model.version_id == "1"
    assert model.uri.startswith("gs://vertex-staging/")  # the SDK staged the local directory
    assert model.supported_deployment_resources_types  # what the SDK builds its deploy from
    endpoint = model.deploy(machine_type="n1-standard-2")
    first_id = endpoint.list_models()[0].id
    assert endpoint.traffic_split == {first_id: 100}

    result = endpoint.predict(instances=ROWS)
    assert result.predictions == _expected(env["first"])
    assert result.deployed_model_id == first_id
    assert result.model_version_id == "1"
    assert result.model_resource_name == model.resource_name

    other = aiplatform.Model.upload(display_name="other", artifact_uri=str(env["base"] / "second"),
                                    serving_container_image_uri=IMAGE)
    endpoint.deploy(other, traffic_percentage=20, machine_type="n1-standard-2")
    split = endpoint.traffic_split
    second_id = next(key for key in split if key != first_id)
    assert split == {first_id: 80, second_id: 20}
    seen = Counter(endpoint.predict(instances=ROWS[:1]).deployed_model_id for _ in range(60))
    assert set(seen) == {first_id, second_id}  # the seeded split reaches both
    assert seen[first_id] > seen[second_id]

    # rawPredict: the model server's own body, the deployed model in X-Vertex-AI-* headers.
    # Endpoint.raw_predict posts the body as is, but always to https://{location}-aiplatform.
    # googleapis.com whatever api_endpoint says, so the same request is sent here by hand.
    body = json.dumps({"instances": ROWS}).encode()
    answer = requests.post(f"{env['server'].url}/v1/{endpoint.resource_name}:rawPredict",
                           data=body, headers={"Content-Type": "application/json"}, timeout=10)
    chosen = answer.headers["X-Vertex-AI-Deployed-Model-Id"]
    assert chosen in (first_id, second_id)
    assert answer.headers["X-Vertex-AI-Model-Version-Id"] == "1"
    expected = env["first"] if chosen == first_id else env["second"]
    assert answer.json()["predictions"] == pytest.approx(_expected(expected))
    assert answer.headers["X-Vertex-AI-Model"] == (
        model.resource_name if chosen == first_id else other.resource_name)

    from google.api_core import exceptions

    with pytest.raises(exceptions.BadRequest, match="is deployed") as refused:
        model.delete()  # refused while deployed, as the service refuses it
    assert refused.value.response.json()["error"]["status"] == "FAILED_PRECONDITION"
    endpoint.undeploy_all()
    assert endpoint.list_models() == []
    endpoint.delete()
    model.delete()
    other.delete()
    with pytest.raises(exceptions.NotFound, match="not found"):
        _ = aiplatform.Endpoint(endpoint.resource_name).display_name  # fetched on first use


def test_versions_aliases_and_default(env: dict[str, Any]) -> None:
    aiplatform = env["aiplatform"]
    base = aiplatform.Model.upload(display_name="versioned", artifact_uri=str(env["base"] / "first"),
                                   serving_container_image_uri=IMAGE)
    newer = aiplatform.Model.upload(display_name="versioned", parent_model=base.resource_name,
                                    artifact_uri=str(env["base"] / "second"),
                                    serving_container_image_uri=IMAGE, is_default_version=False,
                                    version_aliases=["candidate"])
    assert newer.version_id == "2"
    assert newer.resource_name == base.resource_name
    registry = base.versioning_registry
    assert sorted(v.version_id for v in registry.list_versions()) == ["1", "2"]
    assert aiplatform.Model(f"{base.resource_name}@candidate").version_id == "2"
    assert aiplatform.Model(base.resource_name).version_id == "1"  # still the default
    registry.add_version_aliases(["default", "prod"], version="2")
    assert aiplatform.Model(base.resource_name).version_id == "2"
    assert set(aiplatform.Model(f"{base.resource_name}@prod").version_aliases) >= {"prod", "default"}
    registry.delete_version("1")
    assert [v.version_id for v in registry.list_versions()] == ["2"]
    base.delete()


def test_explain_with_sampled_shapley(env: dict[str, Any]) -> None:
    aiplatform = env["aiplatform"]
    from google.cloud.aiplatform import explain

    model = aiplatform.Model.upload(
        display_name="explained", artifact_uri=str(env["base"] / "second"),
        serving_container_image_uri=IMAGE,
        explanation_metadata=explain.ExplanationMetadata(
            inputs={"features": {}},  # no baselines: zeros
            outputs={"value": {}}),
        explanation_parameters=explain.ExplanationParameters(
            {"sampled_shapley_attribution": {"path_count": 8}}))
    endpoint = model.deploy(machine_type="n1-standard-2")
    result = endpoint.explain(instances=ROWS)
    assert result.predictions == pytest.approx(_expected(env["second"]))
    assert result.deployed_model_id == endpoint.list_models()[0].id
    zero = float(env["second"].predict(np.zeros((1, 4)))[0])
    for row, explanation, prediction in zip(ROWS, result.explanations, result.predictions,
                                            strict=True):
        (attribution,) = explanation.attributions
        values = list(attribution.feature_attributions["features"])
        assert len(values) == len(row)
        assert attribution.instance_output_value == pytest.approx(prediction)
        assert attribution.baseline_output_value == pytest.approx(zero)
        # Shapley values add up to the change from the baseline (every sampled path does).
        assert sum(values) == pytest.approx(prediction - zero)
    endpoint.undeploy_all()
    endpoint.delete()
    model.delete()


def test_gapic_prediction_client_over_grpc(env: dict[str, Any]) -> None:
    """PredictionServiceClient over an insecure channel to the gRPC port: Predict, RawPredict,
    Explain and an error's status."""
    import grpc
    from google.api import httpbody_pb2
    from google.api_core import exceptions
    from google.cloud import aiplatform_v1
    from google.cloud.aiplatform import explain
    from google.cloud.aiplatform_v1.services.prediction_service.transports import (
        PredictionServiceGrpcTransport,
    )

    aiplatform = env["aiplatform"]
    model = aiplatform.Model.upload(
        display_name="grpc", artifact_uri=str(env["base"] / "second"),
        serving_container_image_uri=IMAGE,
        explanation_metadata=explain.ExplanationMetadata(inputs={"x": {}}, outputs={"y": {}}),
        explanation_parameters=explain.ExplanationParameters(
            {"sampled_shapley_attribution": {"path_count": 4}}))
    endpoint = model.deploy(machine_type="n1-standard-2")
    deployed_id = endpoint.list_models()[0].id
    channel = grpc.insecure_channel(env["server"].grpc_target)
    client = aiplatform_v1.PredictionServiceClient(
        transport=PredictionServiceGrpcTransport(channel=channel))
    answer = client.predict(endpoint=endpoint.resource_name, instances=ROWS)
    assert list(answer.predictions) == pytest.approx(_expected(env["second"]))
    assert answer.deployed_model_id == deployed_id and answer.model_version_id == "1"
    raw = client.raw_predict(endpoint=endpoint.resource_name, http_body=httpbody_pb2.HttpBody(
        data=json.dumps({"instances": ROWS}).encode(), content_type="application/json"))
    assert json.loads(raw.data)["predictions"] == pytest.approx(_expected(env["second"]))
    explained = client.explain(endpoint=endpoint.resource_name, instances=ROWS)
    assert len(explained.explanations) == len(ROWS) and explained.deployed_model_id == deployed_id
    with pytest.raises(exceptions.NotFound, match="not found"):
        client.predict(endpoint=f"{LOCATION}/endpoints/404", instances=ROWS)
    channel.close()
    endpoint.undeploy_all()
    endpoint.delete()
    model.delete()


def test_batch_prediction_job_writes_vertex_files(env: dict[str, Any], gcs_emulator: Any) -> None:
    aiplatform = env["aiplatform"]
    bucket = gcs_emulator.client().bucket("vertex-staging")
    lines = [json.dumps(row) for row in ROWS] + ["not json"]
    bucket.blob("batch/in.jsonl").upload_from_string("\n".join(lines) + "\n")
    model = aiplatform.Model.upload(display_name="batch", artifact_uri=str(env["base"] / "second"),
                                    serving_container_image_uri=IMAGE)
    job = aiplatform.BatchPredictionJob.create(
        job_display_name="nightly", model_name=model.resource_name, instances_format="jsonl",
        gcs_source="gs://vertex-staging/batch/in.jsonl",
        gcs_destination_prefix="gs://vertex-staging/batch/out", sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    stats = job.completion_stats
    assert (stats.successful_count, stats.failed_count) == (len(ROWS), 1)
    directory = job.output_info.gcs_output_directory
    assert directory.startswith("gs://vertex-staging/batch/out/prediction-batch-")
    prefix = directory.removeprefix("gs://vertex-staging/")
    names = sorted(b.name.removeprefix(prefix + "/") for b in bucket.list_blobs(prefix=prefix))
    assert names == ["errors_00000.jsonl", "predictions_00000.jsonl"]
    results = [json.loads(line) for line in bucket.blob(f"{prefix}/predictions_00000.jsonl")
               .download_as_text().splitlines()]
    assert [r["instance"] for r in results] == ROWS
    assert [r["prediction"] for r in results] == pytest.approx(_expected(env["second"]))
    (error,) = [json.loads(line) for line in bucket.blob(f"{prefix}/errors_00000.jsonl")
                .download_as_text().splitlines()]
    assert error["instance"] is None and "JSON" in error["error"]["message"]
    assert [j.resource_name for j in aiplatform.BatchPredictionJob.list()] == [job.resource_name]
    job.delete()
    model.delete()


def test_operations_are_served_where_the_sdk_polls(env: dict[str, Any]) -> None:
    url = env["server"].url
    op = requests.post(f"{url}/v1/{LOCATION}/endpoints", json={"displayName": "ops"},
                       timeout=10).json()
    assert op["name"].startswith(f"{LOCATION}/endpoints/") and op["done"] is True
    assert op["metadata"]["@type"].endswith("CreateEndpointOperationMetadata")
    assert op["response"]["@type"] == "type.googleapis.com/google.cloud.aiplatform.v1.Endpoint"
    for prefix in ("/v1/", "/ui/"):
        got = requests.get(url + prefix + op["name"], timeout=10).json()
        assert got == op
    waited = requests.post(f"{url}/v1/{op['name']}:wait", timeout=10).json()
    assert waited == op
    endpoint = op["response"]["name"]
    listed = requests.get(f"{url}/v1/{endpoint}/operations", timeout=10).json()
    assert [o["name"] for o in listed["operations"]] == [op["name"]]
    assert requests.delete(f"{url}/v1/{op['name']}", timeout=10).json() == {}
    missing = requests.get(f"{url}/v1/{op['name']}", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    requests.delete(f"{url}/v1/{endpoint}", timeout=10)


def test_state_survives_a_restart(env: dict[str, Any]) -> None:
    aiplatform = env["aiplatform"]
    model = aiplatform.Model.upload(display_name="durable", artifact_uri=str(env["base"] / "first"),
                                    serving_container_image_uri=IMAGE)
    endpoint = model.deploy(machine_type="n1-standard-2")
    stop_server(env["server"].proc)
    env["server"] = server = start_server(env["state"], env=env["env"], grpc_port=free_port())
    aiplatform = _init(server.url)
    again = aiplatform.Endpoint(endpoint.resource_name)
    assert again.predict(instances=ROWS).predictions == _expected(env["first"])
    assert aiplatform.Model(model.resource_name).display_name == "durable"
    again.undeploy_all()
    again.delete()
    aiplatform.Model(model.resource_name).delete()
