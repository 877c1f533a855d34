"""AI Platform :predict through HTTP (in-process WSGI): routing, kwargs, errors, parameters."""

import json
import math

import numpy as np
import pytest

from tests.kit import modelkit


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    v1 = modelkit.sklearn_model(root / "v1", "logreg", seed=0)
    v2 = modelkit.sklearn_model(root / "v2", "linreg", seed=1)
    booster = modelkit.xgboost_model(root / "xgb")
    package = modelkit.custom_package(root / "pkg", kind="sdist")
    modelkit.custom_model_dir(root / "custom", factor=2.0)
    config = modelkit.bootstrap_file(root / "mlemu.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": "v1"}, "v2": {"deploymentUri": "v2"}}},
        "xgb": {"versions": {"v1": {"deploymentUri": "xgb", "framework": "XGBOOST"}}},
        "custom": {"versions": {"v1": {"deploymentUri": "custom",
                                       "predictionClass": "scale_predictor.ScalePredictor",
                                       "packageUris": [str(package)]}}},
        "empty": {},
        "broken": {"versions": {"v1": {"deploymentUri": "does-not-exist"}}},
    })
    return {"root": root, "config": config, "v1": v1, "v2": v2, "booster": booster}


@pytest.fixture(scope="module")
def client(models, tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    settings = Settings(state_dir=tmp_path_factory.mktemp("state"), config_file=models["config"])
    return create_app(settings, warm=False).test_client()


ROW = [[1.0, 2.0, 0.5, -1.0]]


def post(client, path, body, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", **kw)


def test_default_version_versus_explicit_version(client, models):
    x = np.array(ROW)
    default = post(client, "/v1/projects/p/models/m:predict", {"instances": ROW})
    v1 = post(client, "/v1/projects/p/models/m/versions/v1:predict", {"instances": ROW})
    v2 = post(client, "/v1/projects/p/models/m/versions/v2:predict", {"instances": ROW})
    assert default.status_code == v1.status_code == v2.status_code == 200
    assert default.json == v1.json == {"predictions": models["v1"].predict(x).tolist()}
    assert v2.json["predictions"] == pytest.approx(models["v2"].predict(x).tolist())
    assert v1.json != v2.json


def test_xgboost_nan_equals_in_process_missing(client, models):
    import xgboost as xgb

    resp = post(client, "/v1/projects/p/models/xgb:predict", '{"instances": [[0.0, 1.1, NaN]]}')
    assert resp.status_code == 200, resp.data
    expected = models["booster"].predict(
        xgb.DMatrix(np.array([[0.0, 1.1, np.nan]], dtype=np.float32), missing=np.nan))
    assert resp.json["predictions"] == expected.tolist()
    null = post(client, "/v1/projects/p/models/xgb:predict", {"instances": [[0.0, 1.1, None]]})
    assert null.json == resp.json


def test_custom_predictor_receives_kwargs(client):
    resp = post(client, "/v1/projects/p/models/custom:predict",
                {"instances": [[1, 2], [0.1, 0.1]], "threshold": 0.7})
    assert resp.status_code == 200, resp.data
    assert resp.json == {"predictions": [
        {"score": 6.0, "above": True, "kwargs": []},
        {"score": pytest.approx(0.4), "above": False, "kwargs": []},
    ]}
    plain = post(client, "/v1/projects/p/models/custom:predict", {"instances": [[1, 2]]})
    assert plain.json == {"predictions": [6.0]}


def test_nan_in_predictions_is_written_as_nan(client):
    resp = post(client, "/v1/projects/p/models/custom:predict", '{"instances": [[NaN, 1]]}')
    assert resp.status_code == 200
    assert resp.data == b'{"predictions":[NaN]}\n'  # Google's front end ends JSON with a newline
    assert math.isnan(json.loads(resp.data)["predictions"][0])


def google_error(resp, status, code):
    assert resp.status_code == status, resp.data
    assert resp.content_type == "application/json"
    err = resp.json["error"]
    assert err["code"] == status and err["status"] == code
    assert "Traceback" not in resp.get_data(as_text=True)
    return err["message"]


def test_prediction_failure_is_flat_400(client):
    resp = post(client, "/v1/projects/p/models/m:predict", {"instances": [[1.0, 2.0]]})
    assert resp.status_code == 400
    assert resp.json == {"error": "Prediction failed: Exception during sklearn prediction: X has 2 "
                                  "features, but LogisticRegression is expecting 4 features as input."}


def test_model_not_found(client):
    resp = post(client, "/v1/projects/p/models/nope:predict", {"instances": ROW})
    message = google_error(resp, 404, "NOT_FOUND")
    assert 'The model resource: "nope" was not found.' in message
    assert resp.json["error"]["details"][0]["fieldViolations"][0]["field"] == "name"


def test_version_not_found(client):
    resp = post(client, "/v1/projects/p/models/m/versions/v9:predict", {"instances": ROW})
    assert "version was not found" in google_error(resp, 404, "NOT_FOUND")


def test_no_default_version_and_not_ready(client):
    resp = post(client, "/v1/projects/p/models/empty:predict", {"instances": ROW})
    assert "has no default version" in google_error(resp, 400, "FAILED_PRECONDITION")
    resp = post(client, "/v1/projects/p/models/broken:predict", {"instances": ROW})
    message = google_error(resp, 400, "FAILED_PRECONDITION")
    assert "state is FAILED" in message and "does-not-exist" in message


@pytest.mark.parametrize("body,fragment", [
    (b'{"instances": [[1, 2]', "Invalid JSON payload"),
    (b"", "body is empty"),
    (b"[1, 2]", "must be a JSON object"),
    (b'{"inputs": [[1]]}', "Missing required field 'instances'"),
    (b'{"instances": []}', "must not be empty"),
    (b'{"instances": {"a": 1}}', "must be a list"),
    (b'{"instances": [[1,2,3,4]], "threshold": 1}', 'Unknown name "threshold": Cannot find field.'),
])
def test_bad_requests_are_invalid_argument(client, body, fragment):
    resp = post(client, "/v1/projects/p/models/m:predict", body)
    assert fragment in google_error(resp, 400, "INVALID_ARGUMENT")


def test_oversized_body_refused_then_served(client):
    big = b'{"instances": [' + b"[1.0, 2.0, 0.5, -1.0]," * 80_000 + b"[1.0, 2.0, 0.5, -1.0]]}"
    assert len(big) > 1_572_864
    resp = post(client, "/v1/projects/p/models/m:predict", big)
    assert google_error(resp, 400, "INVALID_ARGUMENT") == \
        "Request payload size exceeds the limit: 1572864 bytes."
    assert post(client, "/v1/projects/p/models/m:predict", {"instances": ROW}).status_code == 200


def test_standard_query_parameters(client):
    path = "/v1/projects/p/models/m:predict"
    for query in ("?alt=json", "?$.xgafv=2", "?key=abc", "?quotaUser=me", "?prettyPrint=false"):
        resp = post(client, path + query, {"instances": ROW})
        assert resp.status_code == 200 and "predictions" in resp.json, query
    pretty = post(client, path + "?prettyPrint=true", {"instances": ROW})
    assert pretty.data.startswith(b'{\n  "predictions"')
    selected = post(client, path + "?fields=predictions", {"instances": ROW})
    assert set(selected.json) == {"predictions"}
    none = post(client, path + "?fields=other", {"instances": ROW})
    assert none.json == {}
    resp = post(client, path + "?alt=proto", {"instances": ROW})
    assert "alt=json" in google_error(resp, 400, "INVALID_ARGUMENT")


def test_unknown_routes_and_methods_answer_json(client):
    resp = client.get("/v1/projects/p/models/m:predict")
    assert resp.status_code == 405 and resp.content_type == "application/json"
    assert resp.json["error"]["code"] == 405
    assert "POST" in resp.headers["Allow"]
    resp = client.get("/nowhere")
    assert resp.status_code == 404 and resp.json == {
        "error": "The requested URL /nowhere was not found on this server."}
    resp = client.post("/v1/projects/p/models/m:explode", data="{}")
    assert resp.status_code == 404 and resp.json["error"]["status"] == "NOT_FOUND"


def test_health_probes(client):
    assert client.get("/healthz").json["status"] == "ok"
    assert client.get("/readyz").status_code == 200


def test_warm_up_marks_an_unloadable_bootstrap_version_failed(make_app, tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "model.joblib").write_bytes(b"corrupt")
    modelkit.sklearn_model(tmp_path / "good")
    config = modelkit.bootstrap_file(tmp_path / "b.yaml", {
        "bad": {"versions": {"v1": {"deploymentUri": "bad"}}},
        "good": {"versions": {"v1": {"deploymentUri": "good"}}}})
    client = make_app(config)
    client.emu.warm_up()
    version = client.emu.store.get_version("projects/p/models/bad/versions/v1")
    assert version.state == "FAILED" and "Could not load the model" in version.error_message
    resp = post(client, "/v1/projects/p/models/bad:predict", {"instances": ROW})
    assert "Could not load the model" in google_error(resp, 400, "FAILED_PRECONDITION")
    assert post(client, "/v1/projects/p/models/good:predict", {"instances": ROW}).status_code == 200
