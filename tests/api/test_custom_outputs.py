"""What a custom prediction routine may return on ml v1 :predict (issue 34, item 8).

AI Platform took a list, or a numpy array through `tolist()`, and refused anything else
(kubeflow/batch-predict kubeflow_batch_predict/prediction/prediction_lib.py,
SklearnModel.postprocess: "The post-processing function should return either a numpy ndarray or
a list"; the custom prediction routines guide: predict returns "A list of outputs containing
the prediction results. This list must be JSON serializable"). Refusals are the route's
`{"error": "Prediction failed: ..."}` 400, never a 500.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.kit import modelkit

PROJECT = "p"
SOURCE = '''
import numpy as np


class Shapes:
    """Returns what the instance's first value names."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        kind = instances[0]
        return {
            "list": lambda: [1, "a", None],
            "array": lambda: np.asarray([[1.5, 2.0]], dtype=np.float32),
            "set": lambda: {1, 2},
            "tuple": lambda: (1, 2),
            "dict": lambda: {"a": 1},
            "text": lambda: "abc",
            "generator": lambda: (i for i in range(2)),
            "bytes": lambda: [b"\\x00\\x01"],
            "set-inside": lambda: [{1, 2}],
            "object-inside": lambda: [object()],
        }[kind]()
'''


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("custom-outputs")
    package = modelkit.custom_package(root / "pkg", "shapes", SOURCE, kind="dir")
    (root / "model").mkdir()
    config = modelkit.bootstrap_file(root / "boot.yaml", {"shapes": {"versions": {"v1": {
        "deploymentUri": str(root / "model"), "predictionClass": "shapes.Shapes",
        "packageUris": [str(package)]}}}}, project=PROJECT)
    settings = Settings(state_dir=root / "state", config_file=config, default_project=PROJECT)
    return create_app(settings, warm=False).test_client()


def predict(client: Any, kind: str, query: str = "") -> tuple[int, Any]:
    response = client.post(f"/v1/projects/{PROJECT}/models/shapes:predict{query}",
                           data=json.dumps({"instances": [kind]}),
                           content_type="application/json")
    return response.status_code, json.loads(response.data)


@pytest.mark.parametrize(("kind", "expected"), [
    ("list", [1, "a", None]), ("array", [[1.5, 2.0]]),
    ("generator", [0, 1])])  # an mlemu extension: a predictor that streams over grps
@pytest.mark.parametrize("query", ["", "?prettyPrint=true"])  # fast path and Flask's view
def test_lists_and_arrays_are_answered(client: Any, kind: str, expected: Any, query: str) -> None:
    assert predict(client, kind, query) == (200, {"predictions": expected})


@pytest.mark.parametrize("kind", ["set", "tuple", "dict", "text"])
@pytest.mark.parametrize("query", ["", "?prettyPrint=true"])
def test_other_types_are_refused(client: Any, kind: str, query: str) -> None:
    status, body = predict(client, kind, query)
    assert status == 400
    assert body["error"].startswith("Prediction failed: Bad output type returned after running "
                                    "predict: ")
    assert "should return either a numpy ndarray or a list" in body["error"]


@pytest.mark.parametrize("kind", ["bytes", "object-inside"])
@pytest.mark.parametrize("query", ["", "?prettyPrint=true"])
def test_values_json_cannot_hold_are_refused_not_500(client: Any, kind: str, query: str) -> None:
    status, body = predict(client, kind, query)
    assert status == 400, body
    assert body["error"].startswith("Prediction failed: The predictions are not JSON "
                                    "serializable: ")
