"""Models and a live server (HTTP + gRPC) for the V2 and grps protocol tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests import modelkit
from tests.conftest import LiveServer, free_port, start_server, stop_server

PROJECT = "mlemu"  # the default project the protocols serve

#: A custom predictor exercising the grps payload kinds and streaming.
ECHO_SOURCE = '''
def double(value):
    if isinstance(value, list):
        return [double(v) for v in value]
    return value if isinstance(value, (str, bytes)) else value * 2


class EchoPredictor:
    """Strings: upper-cased (\"stream: a b\" yields words one by one); bytes: reversed;
    objects: their keys sorted with values doubled; rows of numbers: their sums."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, scale=1, **kwargs):
        first = instances[0]
        if isinstance(first, str) and first.startswith("stream:"):
            return (word for word in first[len("stream:"):].split())
        if isinstance(first, str):
            return [first.upper()]
        if isinstance(first, bytes):
            return [first[::-1]]
        if isinstance(first, dict):
            return [{k: double(v) for k, v in sorted(first.items())}]
        return [scale * sum(row) for row in instances]
'''


def text_pipeline(directory: Path) -> Any:
    """A scikit-learn text classifier with string labels: BYTES in, BYTES out."""
    import joblib
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts = ["good great fine", "great good", "bad awful", "awful terrible bad", "fine good",
             "terrible"]
    labels = ["pos", "pos", "neg", "neg", "pos", "neg"]
    model = make_pipeline(CountVectorizer(), LogisticRegression()).fit(texts, labels)
    directory.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, directory / "model.joblib")
    return model


def build_models(root: Path, tensorflow: bool = False) -> dict[str, Any]:
    """The protocol tests' models, as {model name: bootstrap entry} (TensorFlow ones on request:
    building them and serving them costs TensorFlow's import in every process)."""
    modelkit.sklearn_model(root / "sk_v1", "logreg", features=4)
    modelkit.sklearn_model(root / "sk_v2", "forest", features=4)
    text_pipeline(root / "text")
    modelkit.xgboost_model(root / "xgb", features=3)
    package = modelkit.custom_package(root / "pkg", "echo_predictor", ECHO_SOURCE, kind="dir")
    modelkit.custom_model_dir(root / "echo")
    (root / "empty").mkdir()
    entries: dict[str, Any] = {}
    if tensorflow:
        from tests import tfmodels

        tfmodels.tf2_model(root / "tf2")
        tfmodels.keras_model(root / "keras")
        entries = {name: {"versions": {"v1": {"deploymentUri": str(root / name),
                                              "framework": "TENSORFLOW"}}}
                   for name in ("tf2", "keras")}
    return entries | {
        "broken": {"versions": {"v1": {"deploymentUri": str(root / "empty")}}},  # FAILED: no model
        "sk": {"defaultVersion": "v1", "versions": {
            "v1": {"deploymentUri": str(root / "sk_v1"), "framework": "SCIKIT_LEARN"},
            "v2": {"deploymentUri": str(root / "sk_v2"), "framework": "SCIKIT_LEARN"}}},
        "text": {"versions": {"v1": {"deploymentUri": str(root / "text")}}},
        "xgb": {"versions": {"v1": {"deploymentUri": str(root / "xgb"), "framework": "XGBOOST"}}},
        "echo": {"versions": {"v1": {"deploymentUri": str(root / "echo"),
                                     "predictionClass": "echo_predictor.EchoPredictor",
                                     "packageUris": [str(package)]}}},
    }


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("protocol-models")
    return root, build_models(root)


def start_protocol_server(models: tuple[Path, dict[str, Any]],
                          env: dict[str, str] | None = None, workers: int = 1) -> LiveServer:
    """`app.py serve` with HTTP and gRPC, returned once both have loaded every model."""
    root, entries = models
    config = modelkit.bootstrap_file(root / "bootstrap.yaml", entries, project=PROJECT)
    live = start_server(root / "state", config, workers, grpc_port=free_port(),
                        env={"MLEMU_PROJECT": PROJECT, **(env or {})})
    assert live.grpc_target
    # The gRPC process warms up on its own: wait for V2 ServerReady (b"\x08\x01": ready=true).
    with grpc.insecure_channel(live.grpc_target) as channel:
        ready = channel.unary_unary("/inference.GRPCInferenceService/ServerReady",
                                    request_serializer=bytes, response_deserializer=bytes)
        deadline = time.monotonic() + 60
        while ready(b"", timeout=5) != b"\x08\x01":
            if time.monotonic() > deadline:
                stop_server(live.proc)
                raise RuntimeError(f"gRPC server not ready:\n{live.output()}")
            time.sleep(0.1)
    return live


@pytest.fixture(scope="module")
def server(models: tuple[Path, dict[str, Any]]) -> Iterator[LiveServer]:
    """One live `app.py serve` (gunicorn + gRPC) per test module."""
    live = start_protocol_server(models)
    yield live
    stop_server(live.proc)


def in_process(model_dir: Path, instances: list[Any], framework: str | None = None) -> list[Any]:
    """Predictions of the same model loaded in the test process (the reference answer)."""
    import predictors

    predictor, _ = predictors.load(str(model_dir), framework)
    return list(predictor.predict(instances))
