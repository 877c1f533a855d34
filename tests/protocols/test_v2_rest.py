"""V2 REST and grps HTTP details, in-process (Flask test client): the request/response rules."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.kit import iamkit, modelkit
from tests.protocols.conftest import PROJECT


@pytest.fixture
def client(make_app: Any, models: tuple[Path, dict[str, Any]]) -> Any:
    root, entries = models
    config = modelkit.bootstrap_file(root / "inproc.yaml", entries, project=PROJECT)
    return make_app(config)


def infer(client: Any, model: str, body: dict[str, Any], **kwargs: Any) -> Any:
    return client.post(f"/v2/models/{model}/infer", data=json.dumps(body), **kwargs)


def split(response: Any) -> tuple[dict[str, Any], bytes]:
    data = response.get_data()
    length = response.headers.get("Inference-Header-Content-Length")
    if length is None:
        return json.loads(data), b""
    return json.loads(data[:int(length)]), data[int(length):]


def test_id_echoed_only_when_given(client: Any) -> None:
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [1, 2, 3, 4]}]}
    assert "id" not in infer(client, "sk", body).get_json()
    assert infer(client, "sk", {**body, "id": ""}).get_json()["id"] == ""
    assert infer(client, "sk", {**body, "id": "abc"}).get_json()["id"] == "abc"


def test_nested_and_flat_data_are_the_same_tensor(client: Any) -> None:
    rows = [[0.5, -1.0, 2.0, 0.1], [-1.5, 0.3, 0.0, 1.0]]
    nested = infer(client, "sk", {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP64",
                                              "data": rows}]})
    flat = infer(client, "sk", {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP64",
                                            "data": [v for row in rows for v in row]}]})
    assert nested.status_code == flat.status_code == 200
    assert nested.get_json()["outputs"] == flat.get_json()["outputs"]


def test_several_inputs_outputs_selection_order_and_binary(client: Any) -> None:
    """Two inputs become one object per row; the custom predictor answers objects, one output
    per key; the requested order and per-output binary_data are honoured."""
    body = {
        "inputs": [{"name": "a", "shape": [1], "datatype": "INT32", "data": [21]},
                   {"name": "b", "shape": [1, 2], "datatype": "FP32",
                    "parameters": {"binary_data_size": 8}}],
        "outputs": [{"name": "b", "parameters": {"binary_data": True}}, {"name": "a"}],
    }
    header = json.dumps(body).encode()
    response = client.post("/v2/models/echo/infer", data=header + struct.pack("<2f", 0.5, 1.5),
                           headers={"Inference-Header-Content-Length": str(len(header))})
    assert response.status_code == 200, response.get_data()
    assert response.headers["Content-Type"] == "application/octet-stream"
    meta, binary = split(response)
    assert [o["name"] for o in meta["outputs"]] == ["b", "a"]
    b, a = meta["outputs"]
    assert (a["datatype"], a["shape"], a["data"]) == ("INT64", [1], [42])
    assert (b["datatype"], b["shape"], b["parameters"]) == ("FP64", [1, 2], {"binary_data_size": 16})
    assert struct.unpack("<2d", binary) == (1.0, 3.0)
    everything = infer(client, "echo", {**body, "outputs": None,
                                        "parameters": {"binary_data_output": True}},
                       headers={"Inference-Header-Content-Length": str(len(header))})
    assert everything.status_code == 400  # the binary input's bytes are missing: truncated


def test_request_parameters_and_binary_data_output(client: Any) -> None:
    body = {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "UINT8", "data": [1, 2, 3, 4]}],
            "parameters": {"scale": 3, "binary_data_output": True}}
    meta, binary = split(infer(client, "echo", body))
    assert meta["outputs"][0]["parameters"] == {"binary_data_size": 16}
    assert np.frombuffer(binary, "<i8").tolist() == [9, 21]


def test_binary_fp16_and_bool_inputs_reach_predictors(client: Any) -> None:
    body = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP16",
                        "parameters": {"binary_data_size": 4}}]}
    header = json.dumps(body).encode()
    response = client.post("/v2/models/echo/infer",
                           data=header + np.array([0.5, 2.0], "<f2").tobytes(),
                           headers={"Inference-Header-Content-Length": str(len(header))})
    assert response.get_json()["outputs"][0]["data"] == [2.5]
    flags = infer(client, "echo", {"inputs": [{"name": "x", "shape": [1, 3], "datatype": "BOOL",
                                                "data": [True, True, False]}]})
    assert flags.get_json()["outputs"][0]["data"] == [2]


def test_metadata_of_a_custom_model_and_readiness_before_loading(client: Any) -> None:
    meta = client.get("/v2/models/echo").get_json()
    # Not in the V2 `<project>_<format>` list: "" as KServe answers (issue 34, item 13)
    assert (meta["platform"], meta["inputs"], meta["outputs"]) == ("", [], [])
    # warm=False: nothing was loaded up front, so the server is not ready until every model is
    ready = client.get("/v2/health/ready")
    assert (ready.status_code, ready.get_json()) == (503, {"ready": False})
    for model in ("sk", "text", "xgb"):
        assert client.get(f"/v2/models/{model}/ready").status_code == 200
    assert client.get("/v2/models/sk/versions/v2/ready").status_code == 200
    assert client.get("/v2/health/ready").get_json() == {"ready": True}


def test_grps_without_a_default_model_asks_for_one(client: Any) -> None:
    response = client.post("/grps/v1/infer/predict", data=b'{"str_data": "x"}',
                           content_type="application/json")
    assert response.status_code == 400
    assert "No model selected" in response.get_json()["status"]["msg"]
    one = client.post("/grps/v1/infer/predict?model=echo-v1", data=b'{"str_data": "x"}',
                      content_type="application/json")
    assert one.get_json() == {"status": {"code": 200, "msg": "OK", "status": "SUCCESS"},
                              "str_data": "X"}


def test_bodies_over_the_message_limit_are_refused(make_app: Any, models: Any) -> None:
    root, entries = models
    config = modelkit.bootstrap_file(root / "inproc.yaml", entries, project=PROJECT)
    small = make_app(config, max_message_bytes=2048)
    body = {"inputs": [{"name": "x", "shape": [300, 4], "datatype": "FP64",
                        "data": [1.5] * 1200}]}
    response = infer(small, "sk", body)
    assert response.status_code == 400
    assert "exceeds the limit: 2048 bytes" in response.get_json()["error"]
    grps = small.post("/grps/v1/infer/predict?model=echo", data=b"x" * 4096,
                      content_type="application/octet-stream")
    assert grps.status_code == 400 and grps.get_json()["status"]["status"] == "FAILURE"


def test_permissions_are_checked_like_predict(make_app: Any, models: Any) -> None:
    """IAM enforce mode without a grant: inference and metadata are denied (403 with
    credentials, 401 without), health is open."""
    root, entries = models
    config = modelkit.bootstrap_file(root / "inproc.yaml", entries, project=PROJECT)
    iam = iamkit.write_config(root / "iam-nobody.yaml",
                              {"staticTokens": {"nobody": "user:nobody@example.com"}})
    enforced = make_app(config, iam_mode="enforce", iam_config=iam)
    who = iamkit.bearer("nobody")
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [1, 2, 3, 4]}]}
    denied = infer(enforced, "sk", body, headers=who)
    assert denied.status_code == 403
    assert "ml.models.predict" in denied.get_json()["error"]
    assert "ml.versions.get" in enforced.get("/v2/models/sk/versions/v1",
                                             headers=who).get_json()["error"]
    anonymous = infer(enforced, "sk", body)
    assert anonymous.status_code == 401 and "WWW-Authenticate" in anonymous.headers
    assert anonymous.get_json()["error"].startswith("Request is missing required authentication")
    assert enforced.get("/v2/health/live").status_code == 200
    assert enforced.get("/v2").status_code == 401
    assert enforced.get("/v2", headers=who).status_code == 200
    grps = enforced.post("/grps/v1/infer/predict?model=sk-v1", data=b'{"ndarray": [[1, 2, 3, 4]]}',
                         content_type="application/json", headers=who)
    assert grps.status_code == 403
    assert "ml.versions.predict" in grps.get_json()["status"]["msg"]
