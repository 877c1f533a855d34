"""TensorFlow models given large bodies, on AI Platform's :predict and TF Serving's :predict (row
and columnar): a one-float-input signature takes the body's array (wirearray.py,
predictors/json_batch.py) and answers byte for byte what the general path (the body's lists,
instance by instance) answers, errors included, on a Keras export and TF1-era exports with
static shapes; an integer input keeps the lists (its checks read JSON types)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from werkzeug.test import Client

from predictors import json_batch
from protocols import wirearray
from tests.conftest import fast_path_of
from tests.kit import modelkit

pytestmark = pytest.mark.slow
ROWS = 3000


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from app import create_app
    from core.settings import Settings
    from tests.kit import tfmodels

    root = tmp_path_factory.mktemp("tf-arrays")
    dirs = {"keras": tfmodels.keras_model(root / "keras")[0],
            "tf1": tfmodels.tf1_static(root / "tf1"),
            "tf1double": tfmodels.tf1_static(root / "tf1double", "float64"),
            "tf1int": tfmodels.tf1_static(root / "tf1int", "int64")}
    models = {name: {"versions": {"v1": {"deploymentUri": str(path), "framework": "TENSORFLOW"}}}
              for name, path in dirs.items()}
    modelkit.sklearn_model(root / "sk", "logreg", features=3, seed=0)
    models["sk"] = {"versions": {"v1": {"deploymentUri": str(root / "sk")}}}
    config = modelkit.bootstrap_file(root / "mlemu.yaml", models)
    settings = Settings(state_dir=root / "state", config_file=config, max_request_bytes=16 << 20,
                        default_project="p")
    return create_app(settings, warm=False)


def answer(app: Any, model: str, body: bytes, flask_only: bool = False,
           tfserving: bool = False) -> tuple[int, bytes]:
    client = Client(fast_path_of(app).app if flask_only else app)
    path = f"/v1/models/{model}:predict" if tfserving else f"/v1/projects/p/models/{model}:predict"
    resp = client.post(path, data=body, content_type="application/json")
    return resp.status_code, resp.data


def general(app: Any, model: str, body: bytes, tfserving: bool = False) -> tuple[int, bytes]:
    """The answer with neither fast conversion: the body's lists, instance by instance."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wirearray, "keyed_array", lambda *args: None)
        patch.setattr(json_batch, "stacked", lambda *args: None)
        return answer(app, model, body, tfserving=tfserving)


def spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """What each call of module.name returns, in order."""
    taken: list[Any] = []
    real = getattr(module, name)

    def record(*args: Any) -> Any:
        taken.append(real(*args))
        return taken[-1]

    monkeypatch.setattr(module, name, record)
    return taken


def rows(kind: str) -> list[list[Any]]:
    rng = np.random.default_rng(5)
    values = rng.normal(scale=4.0, size=(ROWS, 3))
    if kind == "floats":
        return values.tolist()
    if kind in ("ints", "hugeints"):
        ints: list[list[Any]] = np.round(values * 100000).astype(int).tolist()
        if kind == "hugeints":  # an integer row rounded straight, in a body that also has floats
            ints[0][0], ints[1][0] = 2 ** 53 + 2 ** 29 + 1, 0.5
        return ints
    mixed: list[list[Any]] = values.tolist()
    for row in mixed[::7]:
        row[1] = round(row[1])  # integers written as such beside floats
    if kind == "huge":
        mixed[-1][2] = 2 ** 53 + 2 ** 29 + 1  # rounds differently straight and through a double
    if kind == "bool":
        mixed[-1][0] = True
    if kind == "ragged":
        mixed[-1].append(1.0)
    if kind == "text":
        mixed[-1][1] = "1.0"
    return mixed


@pytest.mark.parametrize("model", ["keras", "tf1", "tf1double", "tf1int"])
@pytest.mark.parametrize("kind", ["floats", "ints", "mixed", "huge", "hugeints", "bool", "ragged",
                                  "text"])
def test_large_bodies_answer_as_the_general_path(app: Any, model: str, kind: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    body = json.dumps({"instances": rows(kind)}).encode()
    assert len(body) >= wirearray.MIN_BYTES
    taken = spy(monkeypatch, json_batch, "stacked")
    expected = general(app, model, body)
    assert answer(app, model, body) == expected
    assert answer(app, model, body, flask_only=True) == expected
    if kind in ("floats", "ints", "mixed") and model != "tf1int":
        assert expected[0] == 200, expected
        assert taken and all(array is not None for array in taken)  # the one-call conversion ran
    if model == "keras" and kind in ("floats", "ints"):
        assert taken and isinstance(taken[0], np.ndarray)


def test_an_integer_input_gets_the_lists(app: Any) -> None:
    """`1.5` beside `1` for an int64 input: the general path names the first value it refuses,
    as written in the body (an array would have turned `1` into `1.0`)."""
    instances = rows("ints")
    instances[3][0] = 1.5
    body = json.dumps({"instances": instances}).encode()
    status, data = answer(app, "tf1int", body)
    assert (status, data) == general(app, "tf1int", body)
    assert status == 400 and b"JSON Value: 1.5 Type: Number is not of expected type: int64" in data


@pytest.mark.parametrize("model", ["keras", "tf1", "tf1double", "tf1int"])
@pytest.mark.parametrize("kind", ["floats", "ints", "mixed", "huge", "hugeints", "bool", "ragged",
                                  "text"])
@pytest.mark.parametrize("key", ["instances", "inputs"])
def test_tf_serving_large_bodies_answer_as_the_general_path(app: Any, model: str, kind: str,
                                                            key: str) -> None:
    body = json.dumps({key: rows(kind)}).encode()
    expected = general(app, model, body, tfserving=True)
    assert answer(app, model, body, tfserving=True) == expected
    if kind in ("floats", "ints", "mixed") and model != "tf1int":
        assert expected[0] == 200, expected
    if kind == "ints" and model == "tf1int":
        assert expected[0] == 200, expected  # the general path for an integer input, same bytes


@pytest.mark.parametrize("key", ["instances", "inputs"])
def test_tf_serving_large_bodies_to_other_frameworks_answer_as_before(app: Any, key: str) -> None:
    """scikit-learn behind TF Serving's API gets the body's lists, as without wirearray."""
    body = json.dumps({key: rows("mixed")}).encode()
    expected = general(app, "sk", body, tfserving=True)
    assert expected[0] == 200, expected
    assert answer(app, "sk", body, tfserving=True) == expected


def test_tf_serving_large_bodies_take_the_array(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = spy(monkeypatch, wirearray, "keyed_array")
    for key in ("instances", "inputs"):
        status, _ = answer(app, "tf1", json.dumps({key: rows("floats")}).encode(), tfserving=True)
        assert status == 200 and taken[-1][0] == key and isinstance(taken[-1][1], np.ndarray)
