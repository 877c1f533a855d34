"""Vertex AI under IAM mode `enforce`, through the SDK: the caller is who its credentials say
(static tokens of the IAM configuration, sent as the SDK sends any OAuth token), and Vertex AI's
predefined roles decide: a viewer lists but cannot upload (403 from the SDK), a user uploads,
deploys and predicts, and an anonymous caller is 401."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import start_server, stop_server
from tests.kit import iamkit, modelkit

pytestmark = pytest.mark.slow
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"


def _sdk(url: str, token: str) -> Any:
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    aiplatform.init(project="p", location="us-central1", api_endpoint=url, api_transport="rest",
                    credentials=Credentials(token))
    return aiplatform


def test_vertex_roles_in_enforce_mode(tmp_path: Path) -> None:
    from google.api_core import exceptions

    modelkit.sklearn_model(tmp_path / "models" / "m", kind="logreg")
    config = iamkit.write_config(tmp_path / "iam.yaml", {
        "staticTokens": {"user-token": "user:ann@example.com",
                         "viewer-token": "user:bob@example.com"},
        "projects": {"p": {"bindings": [
            {"role": "roles/aiplatform.user", "members": ["user:ann@example.com"]},
            {"role": "roles/aiplatform.viewer", "members": ["user:bob@example.com"]}]}}})
    server = start_server(tmp_path / "state", env={
        "MLEMU_IAM_MODE": "enforce", "MLEMU_IAM_CONFIG": str(config),
        "MLEMU_MODEL_ROOTS": str(tmp_path / "models")})
    try:
        aiplatform = _sdk(server.url, "user-token")
        # A local artifact path under the model roots (no staging: the REST request names it).
        from google.cloud import aiplatform_v1

        client = aiplatform.initializer.global_config.create_client(
            client_class=aiplatform.utils.ModelClientWithOverride)
        lro = client.upload_model(parent="projects/p/locations/us-central1", model=aiplatform_v1.Model(
            display_name="m", artifact_uri=str(tmp_path / "models" / "m"),
            container_spec=aiplatform_v1.ModelContainerSpec(image_uri=IMAGE)))
        model = aiplatform.Model(lro.result().model)
        endpoint = model.deploy(machine_type="n1-standard-2")
        assert endpoint.predict(instances=[[1.0, 2.0, 0.5, -1.0]]).predictions

        viewer = _sdk(server.url, "viewer-token")
        assert [m.resource_name for m in viewer.Model.list()] == [model.resource_name]
        with pytest.raises(exceptions.Forbidden, match="aiplatform.endpoints.predict"):
            viewer.Endpoint(endpoint.resource_name).predict(instances=[[1.0, 2.0, 0.5, -1.0]])
        with pytest.raises(exceptions.Forbidden, match="aiplatform.models.delete"):
            viewer.Model(model.resource_name).delete()
        # Anonymous: 401 (the SDK's session then tries to refresh anonymous credentials and
        # raises that it cannot, so the answer is read without it).
        answer = requests.get(f"{server.url}/v1/projects/p/locations/us-central1/models",
                              timeout=30)
        assert answer.status_code == 401
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"
    finally:
        stop_server(server.proc)
