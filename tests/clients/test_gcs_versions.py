"""gs:// deploymentUri and packageUris, end to end: models uploaded to a real Cloud Storage
emulator (gcp-storage-emulator, started by the tests) with google-cloud-storage, versions created
and served through Google's ml v1 client against a live server that reads them from
STORAGE_EMULATOR_HOST. Missing buckets and objects fail the version with a clear errorMessage.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.conftest import LiveServer, start_server, stop_server
from tests.kit import modelkit
from tests.kit.mlclient import ml_client, wait_done

pytestmark = pytest.mark.slow
P = "projects/gcs"
BUCKET = "mlemu-models"
ROWS = [[0.5, -1.0, 2.0, 0.1], [-2.0, 0.3, -0.7, 1.5]]
XGB_ROWS = [[0.0, 1.1, -0.4], [0.5, -0.2, -0.3]]


@pytest.fixture(scope="module")
def setup(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Models built here, uploaded to the emulator; one server with a gs:// bootstrap version."""
    from tests.kit import tfmodels  # imports TensorFlow: only this module's setup pays for it

    base = tmp_path_factory.mktemp("gcs-models")
    bucket = gcs_emulator.client().create_bucket(BUCKET)
    expected: dict[str, Any] = {}
    sk = modelkit.sklearn_model(base / "sk", kind="logreg")
    expected["sk"] = sk.predict(np.asarray(ROWS)).tolist()
    import xgboost as xgb

    booster = modelkit.xgboost_model(base / "xgb")
    expected["xgb"] = booster.predict(xgb.DMatrix(np.asarray(XGB_ROWS, dtype=np.float32))).tolist()
    tfmodels.tf2_model(base / "tf")  # saved_model.pb plus variables/ in a sub-folder
    modelkit.custom_model_dir(base / "custom", factor=2.0)
    sdist = modelkit.custom_package(base / "pkg")  # scale_predictor-0.1.tar.gz
    for name in ("sk", "xgb", "tf", "custom"):
        gcs_emulator.upload_dir(bucket, base / name, f"models/{name}")
    bucket.blob(f"packages/{sdist.name}").upload_from_filename(str(sdist))
    config = modelkit.bootstrap_file(base / "boot.yaml", {
        "boot": {"versions": {"v1": {"deploymentUri": f"gs://{BUCKET}/models/sk"}}}}, project="gcs")
    server = start_server(base / "state", config=config,
                          env={"STORAGE_EMULATOR_HOST": gcs_emulator.host})
    try:
        yield {"server": server, "expected": expected, "sdist": sdist.name, "state": base / "state"}
    finally:
        stop_server(server.proc)


def _create(ml: Any, model: str, version: str, **body: Any) -> dict[str, Any]:
    return dict(ml.projects().models().versions().create(
        parent=f"{P}/models/{model}", body={"name": version, **body}).execute())


def _predict(ml: Any, name: str, instances: list[Any]) -> Any:
    return ml.projects().predict(name=name, body={"instances": instances}).execute()["predictions"]


def test_versions_from_gs_serve_every_framework(setup: dict[str, Any]) -> None:
    server: LiveServer = setup["server"]
    ml = ml_client(server.url)
    # Declared in the bootstrap file with a gs:// URI: warm-up downloaded and loaded it.
    boot = ml.projects().models().versions().get(name=f"{P}/models/boot/versions/v1").execute()
    assert boot["state"] == "READY" and boot["framework"] == "SCIKIT_LEARN"
    assert _predict(ml, f"{P}/models/boot", ROWS) == setup["expected"]["sk"]

    ml.projects().models().create(parent=P, body={"name": "m"}).execute()
    ops = {
        "sk": _create(ml, "m", "sk", deploymentUri=f"gs://{BUCKET}/models/sk/"),
        "xgb": _create(ml, "m", "xgb", deploymentUri=f"gs://{BUCKET}/models/xgb",
                       framework="XGBOOST"),
        "tf": _create(ml, "m", "tf", deploymentUri=f"gs://{BUCKET}/models/tf"),
        "custom": _create(ml, "m", "custom", deploymentUri=f"gs://{BUCKET}/models/custom",
                          predictionClass="scale_predictor.ScalePredictor",
                          packageUris=[f"gs://{BUCKET}/packages/{setup['sdist']}"]),
    }
    for name, op in ops.items():
        done = wait_done(ml, op, timeout=180)
        assert done["response"]["state"] == "READY", (name, done)
    frameworks = {v["name"].rsplit("/", 1)[-1]: v.get("framework") for v in
                  ml.projects().models().versions().list(parent=f"{P}/models/m").execute()["versions"]}
    assert frameworks == {"sk": "SCIKIT_LEARN", "xgb": "XGBOOST", "tf": "TENSORFLOW",
                          "custom": None}
    assert _predict(ml, f"{P}/models/m/versions/sk", ROWS) == setup["expected"]["sk"]
    assert _predict(ml, f"{P}/models/m/versions/xgb", XGB_ROWS) == pytest.approx(
        setup["expected"]["xgb"])
    assert _predict(ml, f"{P}/models/m/versions/tf", [{"a": [1.0, 2.0], "b": 3.0}]) == [
        {"scaled": [3.0, 6.0], "total": 6.0}]
    assert _predict(ml, f"{P}/models/m/versions/custom", [[1, 2], [3, 4]]) == [6.0, 14.0]
    # The copies live in the state directory's cache; the sk prefix was downloaded once for
    # gs://.../models/sk (bootstrap) and once for gs://.../models/sk/ (another URI).
    cached = sorted(p.name for p in (setup["state"] / "gcs").iterdir())
    assert len(cached) == 6 and not [c for c in cached if c.startswith(".")]


@pytest.mark.parametrize(("version", "body", "message"), [
    ("nobucket", {"deploymentUri": "gs://no-such-bucket/models/sk"},
     "Create Version failed. Cannot read gs://no-such-bucket/models/sk: bucket gs://no-such-bucket "
     "does not exist."),
    ("noobject", {"deploymentUri": f"gs://{BUCKET}/models/nothing"},
     f"Create Version failed. Cannot read gs://{BUCKET}/models/nothing: no object or folder "
     f"models/nothing exists in bucket gs://{BUCKET}."),
    ("nopackage", {"deploymentUri": f"gs://{BUCKET}/models/custom",
                   "predictionClass": "scale_predictor.ScalePredictor",
                   "packageUris": [f"gs://{BUCKET}/packages/missing-0.1.tar.gz"]},
     f"Create Version failed. Cannot read gs://{BUCKET}/packages/missing-0.1.tar.gz: no object or "
     "folder packages/missing-0.1.tar.gz exists in bucket gs://mlemu-models."),
])
def test_missing_bucket_or_object_fails_the_version(setup: dict[str, Any], version: str,
                                                    body: dict[str, Any], message: str) -> None:
    ml = ml_client(setup["server"].url)
    if version == "nobucket":
        ml.projects().models().create(parent=P, body={"name": "broken"}).execute()
    done = wait_done(ml, _create(ml, "broken", version, **body))
    assert done["error"]["code"] == 9 and done["error"]["message"] == message  # FAILED_PRECONDITION
    got = ml.projects().models().versions().get(name=f"{P}/models/broken/versions/{version}").execute()
    assert got["state"] == "FAILED" and got["errorMessage"] == message
