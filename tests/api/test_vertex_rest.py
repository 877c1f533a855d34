"""Vertex AI's REST surface in-process (Flask test client): the wire details the SDK relies on,
the service's refusals in its error shape, traffic-split routing, filters and paging, the 501 for
methods mlemu does not serve, and where Vertex's paths meet ml v1's."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pytest

from tests.kit import modelkit

LOC = "/v1/projects/p/locations/us-central1"
IMAGE = "europe-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-3:latest"
ROW = [[1.0, 2.0, 0.5, -1.0]]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("vertex-models")
    return {"root": root, "a": modelkit.sklearn_model(root / "a", "logreg", seed=0),
            "b": modelkit.sklearn_model(root / "b", "linreg", seed=1)}


@pytest.fixture
def client(make_app: Any, models: dict[str, Any]) -> Any:
    return make_app(model_roots=(str(models["root"]),))


def call(client: Any, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body)
    return client.open(path, method=method, data=data, content_type="application/json")


def upload(client: Any, directory: str, models: dict[str, Any], **extra: Any) -> str:
    body = {"model": {"displayName": directory, "artifactUri": str(models["root"] / directory),
                      "containerSpec": {"imageUri": IMAGE}}, **extra}
    op = call(client, "POST", f"{LOC}/models:upload", body)
    assert op.status_code == 200, op.json
    assert op.json["response"]["@type"].endswith("v1.UploadModelResponse")
    return str(op.json["response"]["model"])


def endpoint(client: Any) -> str:
    op = call(client, "POST", f"{LOC}/endpoints", {"displayName": "e"})
    return str(op.json["response"]["name"])


def deploy(client: Any, ep: str, model: str, split: dict[str, int] | None = None) -> Any:
    body: dict[str, Any] = {"deployedModel": {"model": model,
                                              "dedicatedResources": {"minReplicaCount": 1}}}
    if split is not None:
        body["trafficSplit"] = split
    return call(client, "POST", f"/v1/{ep}:deployModel", body)


def test_predict_names_the_deployed_model(client: Any, models: dict[str, Any]) -> None:
    model = upload(client, "a", models)
    ep = endpoint(client)
    op = deploy(client, ep, model)
    deployed = op.json["response"]["deployedModel"]
    assert op.json["metadata"]["@type"].endswith("v1.DeployModelOperationMetadata")
    answer = call(client, "POST", f"/v1/{ep}:predict", {"instances": ROW})
    assert answer.status_code == 200
    assert answer.json == {"predictions": models["a"].predict(np.asarray(ROW)).tolist(),
                           "deployedModelId": deployed["id"], "model": model,
                           "modelDisplayName": "a", "modelVersionId": "1"}
    got = call(client, "GET", f"/v1/{model}").json
    assert got["supportedDeploymentResourcesTypes"] == [1, 3]  # enums as integers
    assert got["deployedModels"] == [{"endpoint": ep, "deployedModelId": deployed["id"]}]
    assert got["versionAliases"] == ["default"]


def test_traffic_split_rules_and_seeded_routing(client: Any, models: dict[str, Any]) -> None:
    a, b = upload(client, "a", models), upload(client, "b", models)
    ep = endpoint(client)
    first = deploy(client, ep, a).json["response"]["deployedModel"]["id"]
    bad = deploy(client, ep, b, {"0": 30, first: 60})
    assert bad.status_code == 400 and bad.json["error"]["status"] == "INVALID_ARGUMENT"
    assert "needs to be 100" in bad.json["error"]["message"]
    second = deploy(client, ep, b, {"0": 25, first: 75}).json["response"]["deployedModel"]["id"]
    assert call(client, "GET", f"/v1/{ep}").json["trafficSplit"] == {first: 75, second: 25}

    def route(n: int) -> list[str]:
        return [call(client, "POST", f"/v1/{ep}:predict", {"instances": ROW}).json["deployedModelId"]
                for _ in range(n)]

    seen = route(200)
    counts = Counter(seen)
    assert set(counts) == {first, second} and counts[first] > 2 * counts[second]
    # Seeded: a new emulator with the same endpoint and split draws the same sequence.
    from registry.vertex_traffic import Router

    router = Router(ep, {first: 75, second: 25})
    assert [router.choose() for _ in range(200)] == seen

    refused = call(client, "POST", f"/v1/{ep}:undeployModel", {"deployedModelId": first})
    assert refused.status_code == 400 and refused.json["error"]["status"] == "FAILED_PRECONDITION"
    ok = call(client, "POST", f"/v1/{ep}:undeployModel",
              {"deployedModelId": first, "trafficSplit": {second: 100}})
    assert ok.status_code == 200
    assert ok.json["response"]["@type"].endswith("v1.UndeployModelResponse")
    assert set(route(5)) == {second}


def test_errors_are_google_rpc_status(client: Any, models: dict[str, Any]) -> None:
    missing = call(client, "GET", f"{LOC}/endpoints/123")
    assert missing.status_code == 404
    assert missing.json == {"error": {
        "code": 404, "status": "NOT_FOUND",
        "message": "Endpoint `projects/p/locations/us-central1/endpoints/123` not found."}}
    assert call(client, "POST", f"{LOC}/endpoints/123:predict",
                {"instances": ROW}).json["error"]["status"] == "NOT_FOUND"
    outside = call(client, "POST", f"{LOC}/models:upload", {"model": {
        "displayName": "x", "artifactUri": "/etc", "containerSpec": {"imageUri": IMAGE}}})
    assert outside.status_code == 400 and "MLEMU_MODEL_ROOTS" in outside.json["error"]["message"]
    custom = upload(client, "a", models)
    body = {"model": {"displayName": "c", "artifactUri": str(models["root"] / "a"),
                      "containerSpec": {"imageUri": "gcr.io/me/server:1"}}}
    custom = call(client, "POST", f"{LOC}/models:upload", body).json["response"]["model"]
    refused = deploy(client, endpoint(client), custom)
    assert refused.status_code == 400
    assert refused.json["error"]["status"] == "FAILED_PRECONDITION"
    assert "custom container" in refused.json["error"]["message"]
    ep = endpoint(client)
    assert call(client, "POST", f"/v1/{ep}:predict", {"instances": ROW}).json["error"][
        "status"] == "FAILED_PRECONDITION"  # nothing deployed
    bad = call(client, "POST", f"/v1/{ep}:predict", {"rows": ROW})
    assert bad.status_code == 400 and 'Unknown name "rows"' in bad.json["error"]["message"]


def test_unserved_vertex_methods_answer_501(client: Any) -> None:
    for method, path in (("POST", f"{LOC}/trainingPipelines"),
                         ("GET", f"{LOC}/datasets"),
                         ("POST", f"{LOC}/endpoints/1:streamRawPredict")):
        answer = call(client, method, path, {})
        assert answer.status_code == 501, path
        assert answer.json["error"]["status"] == "UNIMPLEMENTED"
        assert "docs/vertex.md" in answer.json["error"]["message"]
    # Where the paths meet ml v1's: locations.get stays ml v1's 501; operations under a
    # location are Vertex AI's (and ml v1's coverage table says so).
    location = call(client, "GET", LOC)
    assert location.status_code == 501 and "ml.projects.locations.get" in location.json["error"][
        "message"]
    from api.unimplemented import coverage

    vertex = sorted(row.method.id for row in coverage(client.application) if row.vertex)
    assert vertex == ["ml.projects.locations.operations.cancel",
                      "ml.projects.locations.operations.get"]
    missing = call(client, "GET", f"{LOC}/operations/1")
    assert missing.status_code == 404 and missing.json["error"]["message"] == (
        "Operation `projects/p/locations/us-central1/operations/1` not found.")


def test_versions_filters_and_paging(client: Any, models: dict[str, Any]) -> None:
    a = upload(client, "a", models, modelId="iris")
    assert a == "projects/p/locations/us-central1/models/iris"
    upload(client, "b", models, parentModel=a)
    upload(client, "b", models, modelId="other")
    versions = call(client, "GET", f"/v1/{a}:listVersions").json["models"]
    assert [v["versionId"] for v in versions] == ["1", "2"]
    merged = call(client, "POST", f"/v1/{a}@2:mergeVersionAliases",
                  {"versionAliases": ["default", "canary"]})
    assert merged.json["versionAliases"] == ["default", "canary"]
    assert call(client, "GET", f"/v1/{a}").json["versionId"] == "2"
    assert call(client, "GET", f"/v1/{a}@canary").json["versionId"] == "2"
    clash = call(client, "POST", f"/v1/{a}@1:mergeVersionAliases", {"versionAliases": ["canary"]})
    assert clash.status_code == 409
    named = call(client, "GET", f'{LOC}/models?filter=display_name="b"').json["models"]
    assert [m["name"] for m in named] == [a, f"{LOC[4:]}/models/other"]
    page = call(client, "GET", f"{LOC}/models?pageSize=1").json
    rest = call(client, "GET", f"{LOC}/models?pageSize=1&pageToken={page['nextPageToken']}").json
    assert len(page["models"]) == len(rest["models"]) == 1 and "nextPageToken" not in rest
    patched = call(client, "PATCH", f"/v1/{a}?updateMask=description", {"description": "d"})
    assert patched.json["description"] == "d"
    default_delete = call(client, "DELETE", f"/v1/{a}@2:deleteVersion")
    assert default_delete.json["error"]["status"] == "FAILED_PRECONDITION"
    assert call(client, "DELETE", f"/v1/{a}@1:deleteVersion").status_code == 200
    assert call(client, "GET", f"/v1/{a}@1").status_code == 404


def test_explain_needs_a_spec_that_suits_the_framework(client: Any, models: dict[str, Any]) -> None:
    plain = upload(client, "b", models)
    ep = endpoint(client)
    deploy(client, ep, plain)
    refused = call(client, "POST", f"/v1/{ep}:explain", {"instances": ROW})
    assert refused.status_code == 400
    assert refused.json["error"]["status"] == "FAILED_PRECONDITION"
    assert "explanationSpec" in refused.json["error"]["message"]
    gradients = {"parameters": {"integratedGradientsAttribution": {"stepCount": 10}},
                 "metadata": {"inputs": {"x": {}}, "outputs": {"y": {}}}}
    bad = call(client, "POST", f"/v1/{ep}:deployModel", {"deployedModel": {
        "model": plain, "explanationSpec": gradients}, "trafficSplit": {"0": 0, **{
            k: v for k, v in call(client, "GET", f"/v1/{ep}").json["trafficSplit"].items()}}})
    assert bad.status_code == 400 and "TensorFlow" in bad.json["error"]["message"]
    shapley = {"parameters": {"sampledShapleyAttribution": {"pathCount": 4}},
               "metadata": {"inputs": {"x": {}}, "outputs": {"y": {}}}}
    answer = call(client, "POST", f"/v1/{ep}:explain",
                  {"instances": ROW, "explanationSpecOverride": shapley})
    assert answer.status_code == 200, answer.json
    (attribution,) = answer.json["explanations"][0]["attributions"]
    assert len(attribution["featureAttributions"]["x"]) == 4
    assert answer.json["predictions"] == pytest.approx(
        models["b"].predict(np.asarray(ROW)).tolist())


ROUTINE = '''
import json
import os


class Scaler:
    """A Custom Prediction Routine with Vertex AI's Predictor methods (no SDK import)."""

    def load(self, artifacts_uri):
        with open(os.path.join(artifacts_uri, "factor.json")) as f:
            self.factor = json.load(f)["factor"]

    def preprocess(self, prediction_input):
        scale = prediction_input.get("parameters", {}).get("scale", 1.0)
        return [[x * scale for x in row] for row in prediction_input["instances"]]

    def predict(self, instances):
        return [sum(row) * self.factor for row in instances]

    def postprocess(self, prediction_results):
        return {"predictions": prediction_results}
'''


def test_custom_prediction_routine_runs_in_process(client: Any, models: dict[str, Any]) -> None:
    routine = models["root"] / "routine"
    routine.mkdir(exist_ok=True)
    (routine / "scaler_routine.py").write_text(ROUTINE)
    (routine / "factor.json").write_text('{"factor": 2.0}')
    op = call(client, "POST", f"{LOC}/models:upload", {"model": {
        "displayName": "cpr", "artifactUri": str(routine), "containerSpec": {
            "imageUri": "us-docker.pkg.dev/me/cpr:1",
            "env": [{"name": "MLEMU_PREDICTOR_CLASS", "value": "scaler_routine.Scaler"}]}}})
    model = op.json["response"]["model"]
    assert call(client, "GET", f"/v1/{model}").json["supportedDeploymentResourcesTypes"] == [1]
    ep = endpoint(client)
    assert deploy(client, ep, model).status_code == 200
    answer = call(client, "POST", f"/v1/{ep}:predict",
                  {"instances": [[1.0, 2.0], [3.0, 4.0]], "parameters": {"scale": 10.0}})
    assert answer.status_code == 200, answer.json
    assert answer.json["predictions"] == [60.0, 140.0]
    broken = call(client, "POST", f"/v1/{ep}:predict", {"instances": ["text"]})
    assert broken.status_code == 400 and "Prediction failed" in broken.json["error"]["message"]


def test_patch_mutate_and_operation_methods(client: Any, models: dict[str, Any]) -> None:
    a, b = upload(client, "a", models), upload(client, "b", models)
    ep = endpoint(client)
    first = deploy(client, ep, a).json["response"]["deployedModel"]["id"]
    second = deploy(client, ep, b).json["response"]["deployedModel"]["id"]
    assert call(client, "GET", f"/v1/{ep}").json["trafficSplit"] == {first: 100}
    patched = call(client, "PATCH", f"/v1/{ep}?updateMask=traffic_split,display_name",
                   {"trafficSplit": {first: 10, second: 90}, "displayName": "renamed"})
    assert patched.status_code == 200
    assert patched.json["trafficSplit"] == {first: 10, second: 90}
    assert patched.json["displayName"] == "renamed"
    unknown = call(client, "PATCH", f"/v1/{ep}?updateMask=trafficSplit",
                   {"trafficSplit": {"999": 100}})
    assert unknown.status_code == 400 and "unknown" in unknown.json["error"]["message"]
    mutated = call(client, "POST", f"/v1/{ep}:mutateDeployedModel", {
        "deployedModel": {"id": second, "dedicatedResources": {"minReplicaCount": 3}},
        "updateMask": "dedicatedResources"})
    assert mutated.json["response"]["deployedModel"]["dedicatedResources"] == {
        "minReplicaCount": 3}
    assert mutated.json["response"]["@type"].endswith("v1.MutateDeployedModelResponse")
    op = mutated.json["name"]
    assert op.startswith(f"{ep}/operations/")
    assert call(client, "POST", f"/v1/{op}:cancel").json == {}
    assert call(client, "GET", f"/v1/{op}").json["done"] is True
    listed = call(client, "GET", f"{LOC}/operations?pageSize=2").json
    assert len(listed["operations"]) == 2 and listed["nextPageToken"]
    newest = call(client, "GET", f"{LOC}/models?orderBy=create_time desc").json["models"]
    assert [m["name"] for m in newest][:2] == [b, a]
    assert call(client, "GET", f"{LOC}/models?orderBy=nonsense%20sideways").status_code == 400


def test_batch_job_requests_are_checked_before_anything_runs(client: Any,
                                                             models: dict[str, Any]) -> None:
    model = upload(client, "a", models)
    # What the model says it takes is what a job takes (and what a refusal names).
    assert call(client, "GET", f"/v1/{model}").json["supportedInputStorageFormats"] == [
        "jsonl", "csv", "tf-record", "tf-record-gzip", "file-list"]
    base = {"displayName": "j", "model": model,
            "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": ["gs://b/in.jsonl"]}},
            "outputConfig": {"predictionsFormat": "jsonl",
                             "gcsDestination": {"outputUriPrefix": "gs://b/out"}}}
    for change, status, words in (
            ({"manualBatchTuningParameters": {"batchSize": "many"}}, 400, "TYPE_INT32"),
            ({"manualBatchTuningParameters": {"batchSize": 10**9}}, 400, "from 1 to"),
            ({"dedicatedResources": {"maxReplicaCount": 0}}, 400, "from 1 to"),
            ({"inputConfig": {"instancesFormat": "bigquery"}}, 501,
             "BigQuery batch prediction input (input_config.bigquery_source, instances_format "
             "'bigquery') is not emulated by mlemu: give input_config.gcs_source with "
             "instances_format jsonl, csv, tf-record, tf-record-gzip, file-list."),
            ({"inputConfig": {"instancesFormat": "jsonl", "bigquerySource": {
                "inputUri": "bq://p.d.t"}}}, 501, "BigQuery batch prediction input"),
            ({"outputConfig": {"predictionsFormat": "bigquery", "bigqueryDestination": {
                "outputUri": "bq://p"}}}, 501, "BigQuery batch prediction output"),
            ({"outputConfig": {"predictionsFormat": "csv",
                               "gcsDestination": {"outputUriPrefix": "gs://b/out"}}},
             501, "predictions_format 'csv' is not supported by mlemu"),
            ({"inputConfig": {"instancesFormat": "parquet", "gcsSource": {"uris": ["gs://b/x"]}}},
             400, f'Instance format "parquet" is not supported for Model {model}. Supported '
                  "values are: [jsonl, csv, tf-record, tf-record-gzip, file-list]."),
            ({"instanceConfig": {"instanceType": "object"}, "inputConfig": {
                "instancesFormat": "csv", "gcsSource": {"uris": ["gs://b/in.csv"]}}}, 400,
             'instance_config.instance_type "object" does not apply to instances_format "csv"'),
            ({"instanceConfig": {"instanceType": "tensor"}}, 400,
             'instance_config.instance_type "tensor" is not supported.'),
            ({"instanceConfig": {"includedFields": ["a"], "excludedFields": ["b"]}}, 400,
             "included_fields and instance_config.excluded_fields cannot both be set"),
            ({"instanceConfig": {"keyField": "id"}, "inputConfig": {
                "instancesFormat": "file-list", "gcsSource": {"uris": ["gs://b/in.txt"]}}}, 400,
             'instance_config key_field cannot be used with instances_format "file-list"'),
            ({"instanceConfig": {"includedFields": "a"}}, 400, "must be a list of strings"),
            ({"instanceConfig": {"keyField": 7}}, 400, "key_field must be a field name"),
            ({"instanceConfig": []}, 400, "instanceConfig must be a JSON object"),
            ({"model": f"{model}@7"}, 404, "not found")):
        answer = call(client, "POST", f"{LOC}/batchPredictionJobs", {**base, **change})
        assert answer.status_code == status, (change, answer.json)
        assert words in answer.json["error"]["message"]
    assert call(client, "GET", f"{LOC}/batchPredictionJobs").json == {}


@pytest.mark.parametrize("value", ["text", 5, [1, 2], {"a": {"b": None}}, None, True])
def test_wrongly_typed_fields_are_400s_never_500s(client: Any, models: dict[str, Any],
                                                  value: Any) -> None:
    model = upload(client, "a", models)
    ep = endpoint(client)
    deployed = deploy(client, ep, model).json["response"]["deployedModel"]["id"]
    m = {"displayName": "x", "artifactUri": str(models["root"] / "a"),
         "containerSpec": {"imageUri": IMAGE}}
    requests = [
        ("POST", f"{LOC}/models:upload", {"model": {**m, "containerSpec": value}}),
        ("POST", f"{LOC}/models:upload", {"model": {**m, "versionAliases": value}}),
        ("POST", f"{LOC}/models:upload", {"model": value}),
        ("POST", f"{LOC}/models:upload", {"model": {**m, "explanationSpec": value}}),
        ("PATCH", f"/v1/{model}?updateMask=versionAliases", {"versionAliases": value}),
        ("POST", f"/v1/{model}:mergeVersionAliases", {"versionAliases": value}),
        ("POST", f"/v1/{ep}:deployModel", {"deployedModel": {"model": model},
                                          "trafficSplit": value}),
        ("POST", f"/v1/{ep}:deployModel", {"deployedModel": value}),
        ("POST", f"/v1/{ep}:undeployModel", {"deployedModelId": deployed, "trafficSplit": value}),
        ("PATCH", f"/v1/{ep}?updateMask=trafficSplit", {"trafficSplit": value}),
        ("POST", f"/v1/{ep}:mutateDeployedModel", {"deployedModel": {"id": deployed},
                                                  "updateMask": value}),
        ("POST", f"/v1/{ep}:predict", {"instances": value}),
        ("POST", f"/v1/{ep}:explain", {"instances": [[1.0, 2.0, 0.5, -1.0]],
                                      "explanationSpecOverride": value}),
        ("POST", f"{LOC}/batchPredictionJobs", {
            "displayName": "j", "model": model, "inputConfig": {
                "instancesFormat": "jsonl", "gcsSource": value}, "outputConfig": value}),
        ("POST", f"{LOC}/endpoints", value),
    ]
    for method, path, body in requests:
        answer = call(client, method, path, body)
        assert answer.status_code < 500, (method, path, body, answer.json)
        if answer.status_code >= 400:
            assert answer.json["error"]["status"] in ("INVALID_ARGUMENT", "FAILED_PRECONDITION",
                                                      "NOT_FOUND"), (path, answer.json)
