"""The ml v1 management API through Google's own client library, against a live 2-worker server.

Everything goes through googleapiclient.discovery.build("ml", "v1", static_discovery=True, ...)
pointed at the emulator; errors must surface as HttpError with the real service's status and
message.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from googleapiclient.errors import HttpError

from tests.conftest import LiveServer, start_server, stop_server
from tests.kit import modelkit
from tests.kit.mlclient import error_of, ml_client, wait_done

pytestmark = pytest.mark.slow
P = "projects/demo"
ROWS = [[0.5, -1.0, 2.0, 0.1], [-2.0, 0.3, -0.7, 1.5], [1.2, 1.1, -0.2, -0.4]]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("models")
    built = {
        "linear": modelkit.sklearn_model(root / "linear", kind="linreg"),
        "forest": modelkit.sklearn_model(root / "forest", kind="forest", seed=3),
    }
    (root / "corrupt").mkdir()
    (root / "corrupt" / "model.joblib").write_bytes(b"this is not a joblib file")
    return {"root": root, **built}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("state"), workers=2)
    yield live
    stop_server(live.proc)


@pytest.fixture(scope="module")
def ml(server: LiveServer) -> Any:
    return ml_client(server.url)


def _create_version(ml: Any, model: str, version: str, uri: Path, **extra: Any) -> dict[str, Any]:
    op = ml.projects().models().versions().create(
        parent=f"{P}/models/{model}", body={"name": version, "deploymentUri": str(uri), **extra}
    ).execute()
    assert op["name"].startswith(f"{P}/operations/create_{model}_{version}-")
    assert op["metadata"]["@type"] == "type.googleapis.com/google.cloud.ml.v1.OperationMetadata"
    assert op["metadata"]["operationType"] == "CREATE_VERSION"
    assert op["metadata"]["modelName"] == f"{P}/models/{model}"
    assert op["metadata"]["projectNumber"].isdigit()
    return wait_done(ml, op)


def _predict(ml: Any, name: str, rows: list[list[float]] = ROWS) -> Any:
    return ml.projects().predict(name=name, body={"instances": rows}).execute()["predictions"]


def _http_error(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HttpError) as info:
        call.execute()
    return info.value.resp.status, error_of(info.value)


def test_lifecycle_create_predict_default_patch_page_delete(ml: Any, models: dict[str, Any]) -> None:
    root, linear, forest = models["root"], models["linear"], models["forest"]
    created = ml.projects().models().create(
        parent=P, body={"name": "census", "description": "d", "labels": {"team": "ds"}}).execute()
    assert created["name"] == f"{P}/models/census" and created["etag"]
    assert "defaultVersion" not in created

    v1 = _create_version(ml, "census", "v1", root / "linear")
    assert v1["response"]["state"] == "READY" and v1["response"]["framework"] == "SCIKIT_LEARN"
    assert v1["metadata"]["endTime"] >= v1["metadata"]["startTime"]
    v2 = _create_version(ml, "census", "v2", root / "forest", description="forest")
    assert v2["response"]["state"] == "READY"

    # The first version became the default; the second did not.
    model = ml.projects().models().get(name=f"{P}/models/census").execute()
    assert model["defaultVersion"]["name"] == f"{P}/models/census/versions/v1"
    assert model["defaultVersion"]["isDefault"] is True
    got = ml.projects().models().versions().get(name=f"{P}/models/census/versions/v2").execute()
    assert "isDefault" not in got and got["createTime"] and got["etag"]

    expect_v1 = linear.predict(np.asarray(ROWS)).tolist()
    expect_v2 = forest.predict(np.asarray(ROWS)).tolist()
    assert _predict(ml, f"{P}/models/census") == pytest.approx(expect_v1)
    assert _predict(ml, f"{P}/models/census/versions/v2") == expect_v2
    used = ml.projects().models().versions().get(name=f"{P}/models/census/versions/v2").execute()
    assert used["lastUseTime"] >= used["createTime"]

    switched = ml.projects().models().versions().setDefault(
        name=f"{P}/models/census/versions/v2", body={}).execute()
    assert switched["isDefault"] is True
    assert _predict(ml, f"{P}/models/census") == expect_v2

    # patch: version description, then model description + labels, each an operation.
    op = ml.projects().models().versions().patch(
        name=f"{P}/models/census/versions/v1", updateMask="description",
        body={"description": "linear baseline"}).execute()
    assert op["metadata"]["operationType"] == "UPDATE_VERSION"
    assert wait_done(ml, op)["response"]["description"] == "linear baseline"
    op = ml.projects().models().patch(
        name=f"{P}/models/census", updateMask="description,labels",
        body={"description": "census income", "labels": {"team": "ml"}, "etag": model["etag"]},
    )
    status, err = _http_error(op)  # the etag went stale when setDefault changed the model
    assert status == 409 and err["status"] == "ABORTED"
    fresh = ml.projects().models().get(name=f"{P}/models/census").execute()
    done = wait_done(ml, ml.projects().models().patch(
        name=f"{P}/models/census", updateMask="description,labels",
        body={"description": "census income", "labels": {"team": "ml"}, "etag": fresh["etag"]},
    ).execute())
    assert done["metadata"]["operationType"] == "UPDATE_MODEL"
    assert done["response"]["description"] == "census income"
    assert ml.projects().models().get(name=f"{P}/models/census").execute()["labels"] == {"team": "ml"}

    # list with paging: one version per page, through the client's own list_next.
    versions = ml.projects().models().versions()
    request = versions.list(parent=f"{P}/models/census", pageSize=1)
    seen = []
    while request is not None:
        page = request.execute()
        assert len(page["versions"]) == 1
        seen += [v["name"].rsplit("/", 1)[-1] for v in page["versions"]]
        request = versions.list_next(request, page)
    assert seen == ["v1", "v2"]
    ready = versions.list(parent=f"{P}/models/census", filter="state=READY AND isDefault=true").execute()
    assert [v["name"] for v in ready["versions"]] == [f"{P}/models/census/versions/v2"]

    # Deletes in the refused and allowed orders.
    status, err = _http_error(ml.projects().models().delete(name=f"{P}/models/census"))
    assert (status, err["message"]) == (400, "Field: name Error: A model with versions cannot be deleted.")
    status, err = _http_error(versions.delete(name=f"{P}/models/census/versions/v2"))
    assert status == 400 and err["status"] == "FAILED_PRECONDITION"
    assert "default version v2" in err["message"]
    op = wait_done(ml, versions.delete(name=f"{P}/models/census/versions/v1").execute())
    assert op["metadata"]["operationType"] == "DELETE_VERSION" and "error" not in op
    status, err = _http_error(ml.projects().predict(name=f"{P}/models/census/versions/v1",
                                                    body={"instances": ROWS}))
    assert status == 404
    op = wait_done(ml, versions.delete(name=f"{P}/models/census/versions/v2").execute())
    assert "error" not in op  # the default may go once it is the last version
    assert "defaultVersion" not in ml.projects().models().get(name=f"{P}/models/census").execute()
    op = wait_done(ml, ml.projects().models().delete(name=f"{P}/models/census").execute())
    assert op["name"].startswith(f"{P}/operations/delete_census-")
    assert op["metadata"]["operationType"] == "DELETE_MODEL" and "error" not in op
    status, err = _http_error(ml.projects().models().get(name=f"{P}/models/census"))
    assert status == 404 and 'The model resource: "census" was not found' in err["message"]


def test_corrupt_model_fails_while_other_versions_serve(ml: Any, models: dict[str, Any]) -> None:
    root = models["root"]
    ml.projects().models().create(parent=P, body={"name": "mixed"}).execute()
    assert _create_version(ml, "mixed", "good", root / "forest")["response"]["state"] == "READY"
    op = _create_version(ml, "mixed", "broken", root / "corrupt")
    assert op["error"]["code"] == 9
    broken = ml.projects().models().versions().get(name=f"{P}/models/mixed/versions/broken").execute()
    assert broken["state"] == "FAILED"
    assert broken["errorMessage"].startswith("Create Version failed. Could not load the model: ")
    assert "model.joblib" in broken["errorMessage"] and "Traceback" not in broken["errorMessage"]
    missing = _create_version(ml, "mixed", "missing", root / "nowhere")
    assert "does not exist" in missing["error"]["message"]
    # str(Path("gs://bucket/model")) is "gs:/bucket/model": no bucket (gs:// itself is served,
    # see test_gcs_versions.py).
    gs = _create_version(ml, "mixed", "cloud", Path("gs://bucket/model"))  # type: ignore[arg-type]
    assert gs["error"]["message"] == "Create Version failed. gs:/bucket/model is not a gs://BUCKET/PATH URI."
    # The good version keeps answering, by name and as the default.
    expect = models["forest"].predict(np.asarray(ROWS)).tolist()
    assert _predict(ml, f"{P}/models/mixed") == expect
    assert _predict(ml, f"{P}/models/mixed/versions/good") == expect
    status, err = _http_error(ml.projects().predict(name=f"{P}/models/mixed/versions/broken",
                                                    body={"instances": ROWS}))
    assert status == 400 and err["status"] == "FAILED_PRECONDITION"
    status, err = _http_error(ml.projects().models().versions().setDefault(
        name=f"{P}/models/mixed/versions/broken", body={}))
    assert status == 400 and "only a READY version" in err["message"]
    # A FAILED version can be deleted.
    assert "error" not in wait_done(ml, ml.projects().models().versions().delete(
        name=f"{P}/models/mixed/versions/broken").execute())


def test_documented_errors(ml: Any, models: dict[str, Any]) -> None:
    root = models["root"]
    m = ml.projects().models()
    v = m.versions()
    m.create(parent=P, body={"name": "errs", "labels": {"env": "test"}}).execute()
    _create_version(ml, "errs", "v1", root / "linear")
    cases = [
        (m.create(parent=P, body={"name": "errs"}), 409,
         "Field: model.name Error: A model with the same name already exists."),
        (m.create(parent=P, body={"name": "1bad-name"}), 400,
         "Field: model.name Error: Model name must start with a letter and contain only letters, "
         "numbers and underscores, with at most 128 characters."),
        (m.create(parent=P, body={"name": "a" * 129}), 400, "Field: model.name Error: Model name"),
        (m.create(parent=P, body={"name": "x", "colour": "red"}), 400,
         'Invalid JSON payload received. Unknown name "colour" at \'model\': Cannot find field.'),
        (m.create(parent=P, body={"name": "x", "regions": ["a", "b"]}), 400,
         "Field: model.regions Error: Only one region per model is supported."),
        (m.get(name=f"{P}/models/nope"), 404,
         'Field: name Error: The model resource: "nope" was not found. Please create the model '
         "resource first by using 'gcloud ai-platform models create nope'."),
        (v.create(parent=f"{P}/models/nope", body={"name": "v", "deploymentUri": "/x"}), 404,
         'Field: name Error: The model resource: "nope" was not found.'),
        (v.create(parent=f"{P}/models/errs", body={"name": "v1", "deploymentUri": str(root)}), 409,
         "Field: version.name Error: A version with the same name already exists."),
        (v.create(parent=f"{P}/models/errs", body={"name": "v-2", "deploymentUri": "/x"}), 400,
         "Field: version.name Error: Version name must start with a letter"),
        (v.create(parent=f"{P}/models/errs", body={"name": "v2"}), 400,
         "Field: version.deployment_uri Error: deploymentUri is required."),
        (v.create(parent=f"{P}/models/errs", body={"name": "v2", "deploymentUri": "/x",
                                                   "framework": "PYTORCH"}), 400,
         "Field: version.framework Error: Unknown framework 'PYTORCH'"),
        (v.create(parent=f"{P}/models/errs", body={"name": "v2", "deploymentUri": "/x",
                                                   "framework": "SCIKIT_LEARN",
                                                   "predictionClass": "m.C"}), 400,
         "Field: version.framework Error: Do not specify a framework"),
        (v.get(name=f"{P}/models/errs/versions/nope"), 404,
         "Field: name Error: The specified model version was not found: "
         f"{P}/models/errs/versions/nope."),
        (v.delete(name=f"{P}/models/errs/versions/nope"), 404,
         "Field: name Error: The specified model version was not found"),
        (v.patch(name=f"{P}/models/errs/versions/v1", updateMask="deploymentUri",
                 body={"deploymentUri": "/y"}), 400,
         "Field: update_mask Error: The update mask path 'deploymentUri' is not supported."),
        (v.patch(name=f"{P}/models/errs/versions/v1", body={"description": "x"}), 400,
         "Field: update_mask Error: updateMask is required"),
        (v.patch(name=f"{P}/models/errs/versions/v1", updateMask="description",
                 body={"description": "x", "etag": "c3RhbGU="}), 409, "The etag 'c3RhbGU=' does not match"),
        (m.patch(name=f"{P}/models/errs", updateMask="regions", body={"regions": ["x"]}), 400,
         "Field: update_mask Error: The update mask path 'regions' is not supported."),
        (m.patch(name=f"{P}/models/errs", updateMask="default_version.name",
                 body={"defaultVersion": {"name": "ghost"}}), 400,
         "Field: model.default_version.name Error: Version ghost does not exist or is not READY."),
        (m.list(parent=P, filter="colour=red"), 400,
         "Invalid filter 'colour=red': unknown field 'colour'"),
        (m.list(parent=P, pageToken="garbage"), 400, "Field: page_token Error: Invalid page token."),
        (ml.projects().operations().get(name=f"{P}/operations/create_x_y-1"), 404,
         f"Operation {P}/operations/create_x_y-1 was not found."),
        (ml.projects().jobs().create(parent=P, body={"jobId": "train", "trainingInput": {
            "region": "us-central1"}}), 501, "Training jobs (trainingInput) are not emulated"),
        (ml.projects().locations().get(name=f"{P}/locations/us-central1"), 501,
         "Method ml.projects.locations.get is not implemented by mlemu."),
    ]
    for call, status, message in cases:
        got_status, err = _http_error(call)
        assert (got_status, err["message"][: len(message)]) == (status, message), err
        assert err["code"] == status and "Traceback" not in err["message"]
    # Field errors carry google.rpc.BadRequest details, as the real service's do.
    _, err = _http_error(m.create(parent=P, body={"name": "errs"}))
    assert err["details"][0]["fieldViolations"] == [
        {"field": "model.name", "description": "A model with the same name already exists."}]


def test_lists_filters_operations_and_config(ml: Any, models: dict[str, Any]) -> None:
    m = ml.projects().models()
    for name, team in (("f_a", "red"), ("f_b", "blue"), ("f_c", "red")):
        m.create(parent="projects/lists", body={"name": name, "labels": {"team": team}}).execute()
    red = m.list(parent="projects/lists", filter="labels.team=red").execute()
    assert [x["name"].rsplit("/", 1)[-1] for x in red["models"]] == ["f_a", "f_c"]
    assert m.list(parent="projects/lists", filter="labels.team=green").execute() == {}
    assert m.list(parent="projects/empty").execute() == {}
    page = m.list(parent="projects/lists", pageSize=2).execute()
    assert len(page["models"]) == 2 and page["nextPageToken"]
    rest = m.list(parent="projects/lists", pageSize=2, pageToken=page["nextPageToken"]).execute()
    assert [x["name"] for x in rest["models"]] == ["projects/lists/models/f_c"]
    assert "nextPageToken" not in rest
    status, err = _http_error(m.list(parent="projects/lists", pageSize=2, filter="labels.team=red",
                                     pageToken=page["nextPageToken"]))
    assert status == 400 and "different filter" in err["message"]

    m.create(parent="projects/lists", body={"name": "ops"}).execute()
    op = ml.projects().models().versions().create(
        parent="projects/lists/models/ops",
        body={"name": "v1", "deploymentUri": str(models["root"] / "linear")}).execute()
    wait_done(ml, op)
    ops = ml.projects().operations().list(
        name="projects/lists", filter="metadata.operationType=CREATE_VERSION AND done=true").execute()
    assert [o["name"] for o in ops["operations"]] == [op["name"]]
    assert ml.projects().operations().cancel(name=op["name"]).execute() == {}
    assert "error" not in ml.projects().operations().get(name=op["name"]).execute()

    config = ml.projects().getConfig(name="projects/lists").execute()
    assert config["serviceAccount"].endswith("@cloud-ml.google.com.iam.gserviceaccount.com")
    assert config["serviceAccountProject"].isdigit()


def test_cli_verbs_against_the_server(server: LiveServer, models: dict[str, Any]) -> None:
    from app import main

    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(main, [*args, "--url", server.url, "--project", "cli"])
        assert result.exit_code == 0, result.output
        return result.output

    assert "Created model [tool]" in run("models", "create", "tool", "--labels", "a=b")
    assert "tool" in run("models", "list")
    run("versions", "create", "v1", "--model", "tool", "--origin", str(models["root"] / "linear"))
    run("versions", "create", "v2", "--model", "tool", "--origin", str(models["root"] / "forest"),
        "--framework", "SCIKIT_LEARN")
    listing = run("versions", "list", "--model", "tool")
    assert "v1" in listing and "v2" in listing and "READY" in listing
    run("versions", "set-default", "v2", "--model", "tool")
    assert "DEFAULT_VERSION_NAME" in run("models", "list") and "v2" in run("models", "list")
    run("versions", "delete", "v1", "--model", "tool")
    assert "v1" not in run("versions", "list", "--model", "tool").split()
    bad = runner.invoke(main, ["versions", "create", "v3", "--model", "tool", "--origin",
                               str(models["root"] / "corrupt"), "--url", server.url,
                               "--project", "cli"])
    assert bad.exit_code != 0 and "Could not load the model" in bad.output


def test_client_connection_survives_an_idle_pause(ml: Any, models: dict[str, Any]) -> None:
    """httplib2 reuses an idle connection and does not retry a body that hits a closed one, so
    the server must keep idle connections open longer than a user pauses between calls."""
    ml.projects().models().create(parent=P, body={"name": "idle"}).execute()
    _create_version(ml, "idle", "v1", models["root"] / "linear")
    time.sleep(6.5)  # longer than gunicorn's default keepalive (5 s)
    rows = ROWS * 500  # a body too large to fit in one write to a dead socket
    assert len(_predict(ml, f"{P}/models/idle", rows)) == len(rows)
