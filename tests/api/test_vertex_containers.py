"""Vertex AI custom containers run as local processes (MLEMU_VERTEX_LOCAL_CONTAINERS), through
the REST surface in-process: refused while off (the service's FAILED_PRECONDITION shape),
deployed once healthy, predictions and rawPredict through the data plane (a fault rule reaches
them), failed deploys as failed operations with the command's last output, the allow-list, and
the process ended by undeploy and by reset."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.kit import containerkit

LOC = "/v1/projects/p/locations/us-central1"
IMAGE = "example.com/my/custom:1"
#: A generous bound for an ended process to be gone; never a target.
GONE_S = 120.0


def call(client: Any, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body)
    return client.open(path, method=method, data=data, content_type="application/json")


def upload(client: Any, spec: dict[str, Any], artifacts: Path | None = None) -> str:
    model: dict[str, Any] = {"displayName": "custom",
                             "containerSpec": {"imageUri": IMAGE, **spec}}
    if artifacts is not None:
        model["artifactUri"] = str(artifacts)
    op = call(client, "POST", f"{LOC}/models:upload", {"model": model})
    assert op.status_code == 200, op.json
    return str(op.json["response"]["model"])


def endpoint(client: Any) -> str:
    return str(call(client, "POST", f"{LOC}/endpoints", {"displayName": "e"}).json["response"]["name"])


def deploy(client: Any, ep: str, model: str) -> Any:
    return call(client, "POST", f"/v1/{ep}:deployModel",
                {"deployedModel": {"model": model, "dedicatedResources": {"minReplicaCount": 1}}})


def server_spec(tmp_path: Path) -> dict[str, Any]:
    script = containerkit.write_server(tmp_path / "srv")
    return {"command": [sys.executable, str(script)], "predictRoute": "/predict",
            "healthRoute": "/health", "env": [{"name": "FACTOR", "value": "10"}]}


def gone(pid: int) -> bool:
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


def test_off_refuses_a_command_as_any_custom_image(make_app: Any, tmp_path: Path) -> None:
    client = make_app()
    refused = deploy(client, endpoint(client), upload(client, server_spec(tmp_path)))
    assert refused.status_code == 400
    error = refused.json["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert "MLEMU_VERTEX_LOCAL_CONTAINERS=true" in error["message"]


def test_deploy_predict_raw_faults_undeploy(make_app: Any, tmp_path: Path) -> None:
    artifacts = containerkit.write_artifacts(tmp_path / "models" / "m", 0.5)
    client = make_app(vertex_local_containers=True, model_roots=(str(tmp_path / "models"),))
    model = upload(client, server_spec(tmp_path), artifacts)
    ep = endpoint(client)
    op = deploy(client, ep, model)
    assert op.status_code == 200 and "error" not in op.json, op.json
    deployed_id = op.json["response"]["deployedModel"]["id"]

    answer = call(client, "POST", f"/v1/{ep}:predict",
                  {"instances": [[1, 2]], "parameters": {"scale": 2}})
    assert answer.status_code == 200, answer.json
    prediction = answer.json["predictions"][0]
    assert prediction["sum"] == 70.0  # (1 + 2 + 0.5) * 2 * FACTOR
    assert prediction["env"]["AIP_STORAGE_URI"] == str(artifacts)
    assert prediction["env"]["AIP_DEPLOYED_MODEL_ID"] == deployed_id
    assert (answer.json["deployedModelId"], answer.json["model"]) == (deployed_id, model)
    pid = prediction["pid"]

    raw = client.post(f"/v1/{ep}:rawPredict", data=b"1,2,3", content_type="text/csv")
    assert (raw.status_code, raw.content_type, raw.data) == (200, "text/plain", b"6.0")
    assert raw.headers["X-Vertex-AI-Deployed-Model-Id"] == deployed_id
    teapot = call(client, "POST", f"/v1/{ep}:rawPredict", {"status": 418})
    assert (teapot.status_code, teapot.json) == (418, {"error": "asked for 418"})
    failed = call(client, "POST", f"/v1/{ep}:predict", {"instances": [{"status": 400}]})
    assert failed.status_code == 400 and failed.json["error"]["status"] == "INVALID_ARGUMENT"
    assert "asked for 400" in failed.json["error"]["message"]

    # One data plane: the controls' fault rules reach a container's predictions too.
    rule = call(client, "POST", "/_mlemu/faults", {
        "match": {"deployedModel": deployed_id},
        "error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota."}, "times": 2})
    assert rule.status_code == 200, rule.json
    assert call(client, "POST", f"/v1/{ep}:predict", {"instances": [[1]]}).status_code == 429
    assert client.post(f"/v1/{ep}:rawPredict", data=b"1", content_type="text/csv").status_code == 429
    assert call(client, "POST", f"/v1/{ep}:predict", {"instances": [[1]]}).status_code == 200

    # Model calls are timed like every model's: predict, both rawPredicts, the failed predict
    # and the last one (the two the fault rule answered never reached the container).
    calls = [s.value for family in text_string_to_metric_families(
        client.get("/metrics").get_data(as_text=True)) for s in family.samples
        if s.name == "mlemu_model_call_duration_seconds_count"
        and s.labels.get("version") == ep.rsplit("/", 1)[-1]]
    assert calls == [5]

    undeployed = call(client, "POST", f"/v1/{ep}:undeployModel", {"deployedModelId": deployed_id})
    assert undeployed.status_code == 200, undeployed.json
    assert gone(pid)
    assert client.emu.deployments.containers.running() == []


def test_reset_ends_the_process(make_app: Any, tmp_path: Path) -> None:
    client = make_app(vertex_local_containers=True)
    ep = endpoint(client)
    assert "error" not in deploy(client, ep, upload(client, server_spec(tmp_path))).json
    pid = call(client, "POST", f"/v1/{ep}:predict", {"instances": [[1]]}).json["predictions"][0]["pid"]
    assert call(client, "POST", "/_mlemu/reset", {}).status_code == 200
    assert gone(pid)


def test_failed_starts_fail_the_operation(make_app: Any, tmp_path: Path) -> None:
    client = make_app(vertex_local_containers=True, vertex_container_commands=(sys.executable,))
    ep = endpoint(client)
    crash = upload(client, {"command": [sys.executable, "-c",
                                        "import sys; sys.exit('weights missing at /opt/m/w.bin')"]})
    op = deploy(client, ep, crash)
    assert op.status_code == 200 and op.json["done"] is True
    assert op.json["error"]["code"] == 9  # FAILED_PRECONDITION
    message = op.json["error"]["message"]
    assert "exited with status 1" in message and "weights missing at w.bin" in message
    assert "deployedModels" not in call(client, "GET", f"/v1/{ep}").json

    listed_out = upload(client, {"command": ["env", "python3", "server.py"]})
    op = deploy(client, ep, listed_out)
    assert op.json["error"]["code"] == 7  # PERMISSION_DENIED: not on the allow-list
    assert "MLEMU_VERTEX_CONTAINER_COMMANDS" in op.json["error"]["message"]

    no_command = upload(client, {})
    refused = deploy(client, ep, no_command)
    assert refused.status_code == 400 and "without containerSpec.command" in refused.json[
        "error"]["message"]


def test_malformed_container_specs_are_refused_at_upload(make_app: Any) -> None:
    client = make_app(vertex_local_containers=True)
    for spec, word in (({"command": "python3 server.py"}, "containerSpec.command"),
                       ({"command": ["python3"], "args": [1]}, "containerSpec.args"),
                       ({"env": [{"name": "A", "value": 1}]}, "containerSpec.env"),
                       ({"predictRoute": "predict"}, "containerSpec.predictRoute")):
        model = {"displayName": "bad", "containerSpec": {"imageUri": IMAGE, **spec}}
        refused = call(client, "POST", f"{LOC}/models:upload", {"model": model})
        assert refused.status_code == 400, refused.json
        assert refused.json["error"]["status"] == "INVALID_ARGUMENT"
        assert word in refused.json["error"]["message"]
