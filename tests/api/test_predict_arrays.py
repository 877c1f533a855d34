"""Large all-number :predict bodies (wirearray.py) end to end: scikit-learn and XGBoost get the
array and answer as in process; custom code still gets exactly the lists JSON gives; anything
else in a large body takes the general decoder with its usual semantics and errors."""

import json

import numpy as np
import pytest
from werkzeug.test import Client

from protocols import wirearray
from tests.conftest import fast_path_of
from tests.kit import modelkit

TYPES_SOURCE = '''
class TypesPredictor:
    """Answers, per instance, the Python types it was given."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        kind = type(instances).__name__
        return [kind + ":" + type(row).__name__ + ":" + ",".join(sorted({type(v).__name__ for v in row}))
                for row in instances]
'''

ROWS = 6000


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    logreg = modelkit.sklearn_model(root / "sk", "logreg", features=4, seed=0)
    booster = modelkit.xgboost_model(root / "xgb", features=3)
    package = modelkit.custom_package(root / "pkg", module="types_predictor", source=TYPES_SOURCE,
                                      kind="dir")
    (root / "custom").mkdir()
    config = modelkit.bootstrap_file(root / "mlemu.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": "sk"}}},
        "xgb": {"versions": {"v1": {"deploymentUri": "xgb", "framework": "XGBOOST"}}},
        "custom": {"versions": {"v1": {"deploymentUri": "custom",
                                       "predictionClass": "types_predictor.TypesPredictor",
                                       "packageUris": [str(package)]}}},
    })
    return {"config": config, "logreg": logreg, "booster": booster}


@pytest.fixture(scope="module")
def app(models, tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    settings = Settings(state_dir=tmp_path_factory.mktemp("state"), config_file=models["config"])
    return create_app(settings, warm=False)


@pytest.fixture
def decoded(monkeypatch):
    """How many bodies were decoded straight into an array."""
    taken: list[np.ndarray] = []
    real = wirearray.instances_array

    def spy(data: bytes):
        array = real(data)
        if array is not None:
            taken.append(array)
        return array

    monkeypatch.setattr(wirearray, "instances_array", spy)
    return taken


def post(app, model, data, flask_only=False):
    client = Client(fast_path_of(app).app if flask_only else app)
    return client.post(f"/v1/projects/p/models/{model}:predict", data=data,
                       content_type="application/json")


def body(rows) -> str:
    text = json.dumps({"instances": rows})
    assert len(text) >= wirearray.MIN_BYTES
    return text


def test_scikit_learn_answers_a_large_body_as_in_process(app, models, decoded):
    rows = np.random.default_rng(3).normal(size=(ROWS, 4)).tolist()
    for flask_only in (False, True):  # the fast path and the Flask view alike
        resp = post(app, "sk", body(rows), flask_only)
        assert resp.status_code == 200, resp.data
        assert resp.json == {"predictions": models["logreg"].predict(np.asarray(rows)).tolist()}
    assert len(decoded) == 2 and decoded[0].shape == (ROWS, 4)


def test_xgboost_answers_a_large_body_as_in_process(app, models, decoded):
    import xgboost as xgb

    rows = np.random.default_rng(4).normal(size=(ROWS, 3)).tolist()
    resp = post(app, "xgb", body(rows))
    assert resp.status_code == 200, resp.data
    expected = models["booster"].predict(xgb.DMatrix(np.asarray(rows, dtype=np.float32),
                                                     missing=np.nan))
    assert resp.json == {"predictions": expected.tolist()}
    assert len(decoded) == 1


def test_a_large_xgboost_body_with_null_still_means_missing(app, models, decoded):
    import xgboost as xgb

    rows = np.random.default_rng(5).normal(size=(ROWS, 3))
    rows[::7, 1] = np.nan
    as_json = [[None if np.isnan(v) else v for v in row] for row in rows.tolist()]
    resp = post(app, "xgb", body(as_json))
    assert resp.status_code == 200, resp.data
    expected = models["booster"].predict(xgb.DMatrix(rows.astype(np.float32), missing=np.nan))
    assert resp.json == {"predictions": expected.tolist()}
    assert decoded == []  # null is not a number: the general decoder's semantics


def test_custom_code_gets_the_lists_json_gives(app, decoded):
    floats = [[1.5, 2.25, -0.5]] * ROWS
    resp = post(app, "custom", body(floats))
    assert resp.status_code == 200, resp.data
    assert set(resp.json["predictions"]) == {"list:list:float"}
    mixed = [[1, 2.5, 3]] * ROWS  # integers beside floats stay integers
    resp = post(app, "custom", body(mixed))
    assert set(resp.json["predictions"]) == {"list:list:float,int"}
    assert len(decoded) == 2


@pytest.mark.parametrize("model, rows, error", [
    ("sk", [[1.0, 2.0, 3.0, 4.0]] * ROWS + [[1.0, 2.0, 3.0]], "inhomogeneous"),
    ("sk", [[1.0, 2.0, 3.0, [4.0]]] * ROWS, "inhomogeneous"),
    ("sk", [[1.0, 2.0, 3.0]] * ROWS, "features"),
    ("xgb", [[1.0, "x", 3.0]] * ROWS, "could not convert"),
])
def test_bad_large_bodies_get_the_usual_prediction_error(app, decoded, model, rows, error):
    resp = post(app, model, body(rows))
    assert resp.status_code == 400
    assert resp.json["error"].startswith("Prediction failed: Exception during")
    assert error in resp.json["error"]
    assert len(decoded) == (1 if error == "features" else 0)


def test_a_large_malformed_body_is_invalid_argument(app, decoded):
    resp = post(app, "sk", body([[1.0, 2.0, 3.0, 4.0]] * ROWS)[:-2])
    assert resp.status_code == 400
    assert resp.json["error"]["status"] == "INVALID_ARGUMENT"
    assert decoded == []
