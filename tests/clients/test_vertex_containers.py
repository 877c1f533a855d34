"""A Vertex AI custom container through google-cloud-aiplatform, unmodified, against a live
`app.py serve` with MLEMU_VERTEX_LOCAL_CONTAINERS=true: Model.upload with
serving_container_command/args/env/routes and a local artifact_uri the SDK stages into a real
Cloud Storage emulator, deploy (the container started and healthy), Endpoint.predict,
Endpoint.raw_predict, undeploy (the process gone), a crashing container's failed deploy, and no
process left once the server stops."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import start_server, stop_server
from tests.kit import containerkit, vertexkit

pytestmark = pytest.mark.slow
IMAGE = "example.com/my/custom:1"
#: A generous bound for an ended process to be gone; never a target.
GONE_S = 120.0


class _ToServer(requests.adapters.HTTPAdapter):
    """Sends what the SDK addresses to https://{location}-aiplatform.googleapis.com to mlemu:
    Endpoint.raw_predict ignores api_endpoint (docs/vertex.md)."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        parts = urllib.parse.urlsplit(request.url)
        request.url = self.base + parts.path + (f"?{parts.query}" if parts.query else "")
        return super().send(request, *args, **kwargs)


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def env(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("vertex-containers")
    with vertexkit.sdk_server(gcs_emulator, base, "container-staging",
                              {"MLEMU_VERTEX_LOCAL_CONTAINERS": "true"}) as (server, aiplatform):
        yield {"server": server, "base": base, "aiplatform": aiplatform}


def test_upload_deploy_predict_raw_predict_undeploy(env: dict[str, Any]) -> None:
    aiplatform, base = env["aiplatform"], env["base"]
    script = containerkit.write_server(base / "srv")
    artifacts = containerkit.write_artifacts(base / "artifacts", 1.0)
    model = aiplatform.Model.upload(
        display_name="custom", artifact_uri=str(artifacts), serving_container_image_uri=IMAGE,
        serving_container_command=[sys.executable, str(script)],
        serving_container_args=["--factor=$(FACTOR)"],
        serving_container_environment_variables={"FACTOR": "2"},
        serving_container_ports=[8080], serving_container_predict_route="/predict",
        serving_container_health_route="/health")
    assert model.uri.startswith("gs://container-staging/")  # staged by the SDK
    endpoint = model.deploy(machine_type="n1-standard-2")
    deployed_id = endpoint.list_models()[0].id

    result = endpoint.predict(instances=[[1.0, 2.0]], parameters={"scale": 3})
    prediction = result.predictions[0]
    assert prediction["sum"] == 24.0  # (1 + 2 + offset 1) * scale 3 * FACTOR 2
    assert prediction["argv"] == ["--factor=2"]
    aip = prediction["env"]
    assert Path(aip["AIP_STORAGE_URI"], "offset.txt").read_text() == "1.0"  # the local copy
    assert (aip["AIP_PREDICT_ROUTE"], aip["AIP_HEALTH_ROUTE"]) == ("/predict", "/health")
    assert aip["AIP_ENDPOINT_ID"] == endpoint.name and aip["AIP_DEPLOYED_MODEL_ID"] == deployed_id
    assert result.deployed_model_id == deployed_id
    assert result.model_resource_name == model.resource_name

    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.requests import AuthorizedSession

    session = AuthorizedSession(AnonymousCredentials())
    session.mount("https://", _ToServer(env["server"].url))
    endpoint.authorized_session = session
    raw = endpoint.raw_predict(body=b"4,5", headers={"Content-Type": "text/csv"})
    assert (raw.status_code, raw.headers["Content-Type"], raw.content) == (
        200, "text/plain", b"9.0")
    assert raw.headers["X-Vertex-AI-Deployed-Model-Id"] == deployed_id
    raw = endpoint.raw_predict(body=json.dumps({"instances": [[1.0]]}).encode(),
                               headers={"Content-Type": "application/json"})
    assert raw.json()["predictions"][0]["sum"] == 4.0  # the container's own body, unwrapped

    endpoint.undeploy_all()
    assert _gone(int(prediction["pid"]))  # a protobuf Value: a float
    endpoint.delete()
    model.delete()


def test_gapic_prediction_client_over_grpc(env: dict[str, Any]) -> None:
    """Predict and RawPredict on the gRPC port reach the same container; a container's error
    status is the call's status."""
    import grpc
    from google.api import httpbody_pb2
    from google.api_core import exceptions
    from google.cloud import aiplatform_v1
    from google.cloud.aiplatform_v1.services.prediction_service.transports import (
        PredictionServiceGrpcTransport,
    )

    aiplatform = env["aiplatform"]
    script = containerkit.write_server(env["base"] / "grpc-srv")
    model = aiplatform.Model.upload(
        display_name="grpc", serving_container_image_uri=IMAGE,
        serving_container_command=[sys.executable, str(script)])
    endpoint = model.deploy(machine_type="n1-standard-2")
    channel = grpc.insecure_channel(env["server"].grpc_target)
    client = aiplatform_v1.PredictionServiceClient(
        transport=PredictionServiceGrpcTransport(channel=channel))
    try:
        answer = client.predict(endpoint=endpoint.resource_name, instances=[[2.0, 3.0]])
        assert answer.predictions[0]["sum"] == 5.0
        assert answer.deployed_model_id == endpoint.list_models()[0].id
        raw = client.raw_predict(endpoint=endpoint.resource_name, http_body=httpbody_pb2.HttpBody(
            data=b"1,1", content_type="text/csv"))
        assert (raw.content_type, raw.data) == ("text/plain", b"2.0")
        with pytest.raises(exceptions.BadRequest, match="asked for 404"):
            client.raw_predict(endpoint=endpoint.resource_name, http_body=httpbody_pb2.HttpBody(
                data=b'{"status": 404}', content_type="application/json"))
    finally:
        channel.close()
    endpoint.undeploy_all()
    endpoint.delete()
    model.delete()


def test_a_crashing_container_fails_the_deploy(env: dict[str, Any]) -> None:
    aiplatform = env["aiplatform"]
    from google.api_core import exceptions

    model = aiplatform.Model.upload(
        display_name="crash", serving_container_image_uri=IMAGE,
        serving_container_command=[sys.executable, "-c",
                                   "import sys; print('no model here', file=sys.stderr); "
                                   "sys.exit(4)"])
    endpoint = aiplatform.Endpoint.create(display_name="crash")
    with pytest.raises(exceptions.GoogleAPICallError) as failed:
        model.deploy(endpoint=endpoint, machine_type="n1-standard-2")
    assert "exited with status 4" in str(failed.value)
    assert "no model here" in str(failed.value)
    assert endpoint.list_models() == []
    endpoint.delete()
    model.delete()


def test_no_container_outlives_its_server(tmp_path: Path) -> None:
    """A second server: deploy over REST, then stop the server; its container ends with it."""
    script = containerkit.write_server(tmp_path / "srv")
    server = start_server(tmp_path / "state", env={"MLEMU_VERTEX_LOCAL_CONTAINERS": "true"})
    try:
        loc = f"{server.url}/v1/projects/p/locations/us-central1"
        model = requests.post(f"{loc}/models:upload", timeout=60, json={"model": {
            "displayName": "c", "containerSpec": {
                "imageUri": IMAGE, "command": [sys.executable, str(script)]}}}).json()
        ep = requests.post(f"{loc}/endpoints", json={"displayName": "e"}, timeout=60).json()
        ep_name = ep["response"]["name"]
        op = requests.post(f"{server.url}/v1/{ep_name}:deployModel", timeout=300, json={
            "deployedModel": {"model": model["response"]["model"],
                              "dedicatedResources": {"minReplicaCount": 1}}}).json()
        assert "error" not in op, op
        answer = requests.post(f"{server.url}/v1/{ep_name}:predict", timeout=300,
                               json={"instances": [[1]]}).json()
        pid = answer["predictions"][0]["pid"]
    finally:
        stop_server(server.proc)
    assert _gone(pid)


def test_enforced_iam_runs_only_listed_executables(tmp_path: Path) -> None:
    """IAM enforced, MLEMU_VERTEX_CONTAINER_COMMANDS naming this Python: a user deploys and
    predicts; a viewer may not predict; a command not on the list fails the deploy."""
    from google.api_core import exceptions
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    from tests.kit import iamkit

    config = iamkit.write_config(tmp_path / "iam.yaml", {
        "staticTokens": {"user-token": "user:ann@example.com",
                         "viewer-token": "user:bob@example.com"},
        "projects": {"p": {"bindings": [
            {"role": "roles/aiplatform.user", "members": ["user:ann@example.com"]},
            {"role": "roles/aiplatform.viewer", "members": ["user:bob@example.com"]}]}}})
    script = containerkit.write_server(tmp_path / "srv")
    server = start_server(tmp_path / "state", env={
        "MLEMU_IAM_MODE": "enforce", "MLEMU_IAM_CONFIG": str(config),
        "MLEMU_VERTEX_LOCAL_CONTAINERS": "true", "MLEMU_VERTEX_CONTAINER_COMMANDS": sys.executable})
    try:
        def init(token: str) -> None:
            aiplatform.init(project="p", location="us-central1", api_endpoint=server.url,
                            api_transport="rest", credentials=Credentials(token))

        init("user-token")
        model = aiplatform.Model.upload(display_name="listed", serving_container_image_uri=IMAGE,
                                        serving_container_command=[sys.executable, str(script)])
        endpoint = model.deploy(machine_type="n1-standard-2")
        assert endpoint.predict(instances=[[1.0, 1.0]]).predictions[0]["sum"] == 2.0
        other = aiplatform.Model.upload(display_name="unlisted", serving_container_image_uri=IMAGE,
                                        serving_container_command=["env", sys.executable,
                                                                   str(script)])
        with pytest.raises(exceptions.GoogleAPICallError, match="MLEMU_VERTEX_CONTAINER_COMMANDS"):
            other.deploy(machine_type="n1-standard-2")
        init("viewer-token")
        with pytest.raises(exceptions.Forbidden, match="aiplatform.endpoints.predict"):
            aiplatform.Endpoint(endpoint.resource_name).predict(instances=[[1.0]])
    finally:
        stop_server(server.proc)
