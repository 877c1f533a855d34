"""Errors in each protocol's own words (issue 16), through the in-process WSGI app.

Wrong row lengths for an XGBoost model answer the real service's message over every protocol,
without XGBoost's native backtrace or this machine's paths; unknown models are worded as each
protocol's own servers word them; V2 compression honours `q=0`; a model whose first version is
still being created says so.
"""

from __future__ import annotations

import gzip
import json
import logging
import zlib

import pytest
from click.testing import CliRunner

from core.errors import PredictionFailed, public_text
from tests.kit import modelkit

PROJECT = "p"
ROW4 = [[0.0, 1.1, 2.2, 3.3]]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    modelkit.xgboost_model(root / "xgb", features=3)
    modelkit.sklearn_model(root / "sk", "logreg", features=4)
    config = modelkit.bootstrap_file(root / "mlemu.yaml", {
        "xgb": {"versions": {"v1": {"deploymentUri": "xgb", "framework": "XGBOOST"}}},
        "sk": {"versions": {"v1": {"deploymentUri": "sk", "framework": "SCIKIT_LEARN"}}},
    }, project=PROJECT)
    return root, config


@pytest.fixture(scope="module")
def client(models, tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    settings = Settings(state_dir=tmp_path_factory.mktemp("state"), config_file=models[1],
                        default_project=PROJECT)
    return create_app(settings, warm=False).test_client()


def post(client, path, body, **kw):
    return client.post(path, data=json.dumps(body), content_type="application/json", **kw)


def v2_body(rows):
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [len(rows), len(rows[0])],
                        "data": rows}]}


def assert_clean(text: str) -> None:
    assert "Stack trace" not in text and "[bt]" not in text and "libxgboost" not in text
    assert "/workspace/" not in text and "site-packages" not in text


@pytest.mark.parametrize("rows, missing_or_extra", [
    (ROW4, "training data did not have the following fields: f3"),
    ([[0.0, 1.1]], "expected f2 in input data"),
    ([[0.0]], "expected f1, f2 in input data"),
])
def test_xgboost_row_length_refused_in_every_protocol(client, rows, missing_or_extra):
    width = len(rows[0])
    got = [f"f{i}" for i in range(width)]
    detail = (f"Exception during xgboost prediction: feature_names mismatch: ['f0', 'f1', 'f2'] "
              f"{got}\n{missing_or_extra}")
    ml = post(client, f"/v1/projects/{PROJECT}/models/xgb:predict", {"instances": rows})
    assert (ml.status_code, ml.json) == (400, {"error": f"Prediction failed: {detail}"})
    tfs = post(client, "/v1/models/xgb:predict", {"instances": rows})
    assert (tfs.status_code, tfs.json) == (400, {"error": detail})
    v2 = post(client, "/v2/models/xgb/infer", v2_body(rows))
    assert v2.status_code == 400 and detail in v2.json["error"]
    grps = post(client, "/grps/v1/infer/predict?model=xgb", {"ndarray": rows})
    assert grps.status_code == 400 and detail in grps.json["status"]["msg"]
    for answer in (ml, tfs, v2, grps):
        assert_clean(answer.get_data(as_text=True))


def test_app_predict_names_the_mismatch_without_a_backtrace(models, tmp_path):
    from app import main

    root, _ = models
    instances = tmp_path / "rows.json"
    instances.write_text(json.dumps(ROW4[0]) + "\n")
    result = CliRunner().invoke(main, ["predict", "--model-dir", str(root / "xgb"),
                                       "--json-instances", str(instances)])
    assert result.exit_code == 1
    assert "feature_names mismatch" in result.output and "f3" in result.output
    assert_clean(result.output)


def test_native_backtrace_and_paths_stay_in_the_log(caplog):
    """The text XGBoost itself raises for 4 columns to a 3-feature booster, as every framework's
    failure reaches PredictionFailed: the caller gets the sentence, the log keeps the frames."""
    import numpy as np
    import xgboost

    x = np.random.default_rng(0).normal(size=(20, 3))
    booster = xgboost.train({"objective": "binary:logistic"},
                            xgboost.DMatrix(x, label=(x[:, 0] > 0).astype(int)), 2)
    with pytest.raises(xgboost.core.XGBoostError) as raised:
        booster.predict(xgboost.DMatrix(np.zeros((1, 4), np.float32)))
    native = str(raised.value)
    assert "Stack trace:" in native and "[bt]" in native  # what XGBoost really sends
    with caplog.at_level(logging.WARNING, logger="mlemu.errors"):
        failed = PredictionFailed(f"Exception during xgboost prediction: {native}")
    assert failed.message.endswith("Number of columns does not match number of features in booster.")
    assert_clean(failed.message)
    assert "[bt]" in caplog.text  # the operator still sees it


def test_public_text_keeps_urls_and_replaces_local_paths():
    text = "Cannot open '/srv/models/census/model.bst'; see gs://bucket/m/model.bst, http://h/a/b"
    assert public_text(text) == "Cannot open 'model.bst'; see gs://bucket/m/model.bst, http://h/a/b"
    assert public_text(text, keep_paths=True) == text


def test_unknown_model_in_each_protocols_words(client):
    body = {"instances": [[1.0, 2.0, 3.0, 4.0]]}
    ml = post(client, f"/v1/projects/{PROJECT}/models/nope:predict", body)
    assert ml.status_code == 404 and 'The model resource: "nope" was not found' in ml.json["error"]["message"]
    v2 = post(client, "/v2/models/nope/infer", v2_body([[1.0]]))
    assert (v2.status_code, v2.json) == (404, {"error": "Model with name nope does not exist."})
    ready = client.get("/v2/models/nope/ready")
    assert (ready.status_code, ready.json) == (404, {"error": "Model with name nope does not exist."})
    version = client.get("/v2/models/sk/versions/v9")
    assert (version.status_code, version.json) == (
        404, {"error": "Request for unknown model: 'sk' version v9 is not found"})
    for selector in ("nope", "sk-v9"):
        grps = post(client, f"/grps/v1/infer/predict?model={selector}", {"str_data": "x"})
        assert grps.status_code == 404
        assert grps.json["status"]["msg"] == f"Not found model: {selector}"
    tfs = post(client, "/v1/models/nope:predict", body)
    assert tfs.json == {"error": "Servable not found for request: Latest(nope)"}


@pytest.mark.parametrize("accept, coding", [
    ("gzip", "gzip"),
    ("deflate;q=0.5, gzip;q=0.4", "deflate"),
    ("identity, gzip;q=0", None),
    ("gzip;q=0, deflate;q=0", None),
    ("identity;q=1, gzip;q=0.5", None),
    ("", None),
])
def test_v2_compression_follows_accept_encoding(client, accept, coding):
    answer = post(client, "/v2/models/sk/infer", v2_body([[1.0, 2.0, 3.0, 4.0]]),
                  headers={"Accept-Encoding": accept} if accept else {})
    assert answer.status_code == 200
    assert answer.headers.get("Content-Encoding") == coding
    assert "Accept-Encoding" in answer.headers["Vary"]
    data = answer.get_data()
    if coding == "gzip":
        data = gzip.decompress(data)
    elif coding == "deflate":
        data = zlib.decompress(data)
    assert json.loads(data)["model_name"] == "sk"


def test_predict_while_the_first_version_is_being_created(client):
    from registry.resources import Model, Version

    emu = client.application.extensions["mlemu"]
    emu.store.put_model(Model(name=f"projects/{PROJECT}/models/fresh"))
    emu.store.put_version(Version(name=f"projects/{PROJECT}/models/fresh/versions/v1",
                                  deployment_uri="/nowhere", state="CREATING"))
    answer = post(client, f"/v1/projects/{PROJECT}/models/fresh:predict", {"instances": [[1.0]]})
    assert answer.status_code == 400
    assert answer.json["error"]["status"] == "FAILED_PRECONDITION"
    message = answer.json["error"]["message"]
    assert "has no default version yet: version v1 is being created (state CREATING)" in message
    assert "wait for its operation to be done" in message
