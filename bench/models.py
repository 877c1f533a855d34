"""The benchmark's models, request bodies and in-process reference predictions.

Every server loads the same files from bench/results/models/<name>/ and answers the same
instances; the in-process predictions computed here are what every response is checked against.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

FEATURES = 30
SEED = 0
#: name -> (framework directory kind, description)
MODELS = {
    "logreg": "scikit-learn LogisticRegression, 30 features",
    "forest": "scikit-learn RandomForestClassifier, 100 trees, depth 8",
    "xgb": "XGBoost classifier (binary:logistic), 100 rounds, depth 6",
    "tf": "TensorFlow SavedModel, Dense(64, relu) -> Dense(1, sigmoid) over 30 features",
    "tf1": "the same network as a TF1-era export (v1 SavedModelBuilder, x [?, 30] -> score [?])",
}
PEER_MODELS = ("logreg", "forest", "xgb")
TF_MODELS = ("tf", "tf1")


def training_data(n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(n, FEATURES))
    w = rng.normal(size=FEATURES)
    y = ((x @ w + 0.5 * np.sin(3 * x[:, 0]) * x[:, 1]) > 0).astype(int)
    return x, y


def instances(n: int, seed: int = 1) -> list[list[float]]:
    """`n` rows of 30 features, rounded so every server parses the exact same doubles."""
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(size=(n, FEATURES)), 6).tolist()


def build(root: Path, with_tf: bool = True) -> dict[str, Path]:
    """Train each model into root/<name>/ (skipped when already there); name -> directory."""
    import joblib

    x, y = training_data()
    dirs = {name: root / name for name in MODELS if with_tf or name not in TF_MODELS}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    if not (dirs["logreg"] / "model.joblib").exists():
        from sklearn.linear_model import LogisticRegression

        joblib.dump(LogisticRegression(max_iter=1000).fit(x, y), dirs["logreg"] / "model.joblib")
    if not (dirs["forest"] / "model.joblib").exists():
        from sklearn.ensemble import RandomForestClassifier

        forest = RandomForestClassifier(n_estimators=100, max_depth=8, random_state=SEED).fit(x, y)
        joblib.dump(forest, dirs["forest"] / "model.joblib")
    if not (dirs["xgb"] / "model.bst").exists():
        import xgboost as xgb

        booster = xgb.train({"objective": "binary:logistic", "max_depth": 6, "nthread": 2},
                            xgb.DMatrix(x, label=y), num_boost_round=100)
        # JSON inside model.bst: every XGBoost loader (path or buffer) recognises it by content.
        booster.save_model(str(dirs["xgb"] / "model.json"))
        (dirs["xgb"] / "model.json").rename(dirs["xgb"] / "model.bst")
    if with_tf and not (dirs["tf"] / "saved_model.pb").exists():
        _build_tf(dirs["tf"])
    if with_tf and not (dirs["tf1"] / "saved_model.pb").exists():
        _build_tf1(dirs["tf1"])
    return dirs


def _tf_weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    return (rng.normal(scale=0.2, size=(FEATURES, 64)).astype(np.float32),
            np.zeros(64, np.float32), rng.normal(scale=0.2, size=(64, 1)).astype(np.float32))


def _build_tf1(directory: Path) -> None:
    """The Dense network exported the TF1 way users' Estimator-era models were: a graph with a
    static-width placeholder [?, 30], variables restored from the checkpoint, a predict
    serving_default signature built by the v1 SavedModelBuilder."""
    import tensorflow as tf

    w1, b1, w2 = _tf_weights()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, FEATURES], name="x")
        kernel1 = v1.get_variable("w1", initializer=w1)
        bias1 = v1.get_variable("b1", initializer=b1)
        kernel2 = v1.get_variable("w2", initializer=w2)
        score = tf.sigmoid(tf.matmul(tf.nn.relu(tf.matmul(x, kernel1) + bias1), kernel2))[:, 0]
        builder = v1.saved_model.Builder(str(directory))
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": v1.saved_model.predict_signature_def({"x": x},
                                                                        {"score": score})})
        builder.save()


def _build_tf(directory: Path) -> None:
    """The Dense network as a TF2 SavedModel (tf.saved_model.save of a tf.Module)."""
    import tensorflow as tf

    w1, b1, w2 = (tf.constant(w) for w in _tf_weights())

    class Net(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1, self.b1, self.w2 = tf.Variable(w1), tf.Variable(b1), tf.Variable(w2)

        @tf.function(input_signature=[tf.TensorSpec([None, FEATURES], tf.float32, name="x")])
        def serve(self, x: Any) -> dict[str, Any]:
            hidden = tf.nn.relu(x @ self.w1 + self.b1)
            return {"score": tf.sigmoid(hidden @ self.w2)[:, 0]}

    net = Net()
    tf.saved_model.save(net, str(directory), signatures={"serving_default": net.serve})


def reference(model_dir: Path, name: str) -> Callable[[list[list[float]]], list[Any]]:
    """An in-process predict function answering what the servers should answer."""
    import joblib

    if name in ("logreg", "forest"):
        model = joblib.load(model_dir / "model.joblib")
        return lambda rows: model.predict(np.asarray(rows)).tolist()
    if name == "xgb":
        import xgboost as xgb

        booster = xgb.Booster()
        booster.load_model(bytearray((model_dir / "model.bst").read_bytes()))
        booster.set_param({"nthread": 1})
        return lambda rows: booster.predict(xgb.DMatrix(np.asarray(rows, np.float32))).tolist()
    raise ValueError(name)


def floor_calls(model_dir: Path, name: str, body: bytes) -> tuple[Callable[[], Any],
                                                                    Callable[[], Any]]:
    """The in-process floor for one request body, as two calls: the model alone on a ready
    array, and orjson decode + `np.asarray` + model + orjson encode (what a server can at best
    approach). The model is loaded once, here."""
    import orjson

    rows = orjson.loads(body)["instances"]
    model_call: Callable[[np.ndarray], Any]
    if name in ("logreg", "forest"):
        import joblib

        model = joblib.load(model_dir / "model.joblib")
        dtype: Any = None
        model_call = model.predict
    else:
        import xgboost as xgb

        booster = xgb.Booster()
        booster.load_model(bytearray((model_dir / "model.bst").read_bytes()))
        booster.set_param({"nthread": 1})
        dtype = np.float32
        model_call = lambda a: booster.predict(xgb.DMatrix(a))  # noqa: E731
    array = np.asarray(rows, dtype)

    def full() -> bytes:
        data = np.asarray(orjson.loads(body)["instances"], dtype)
        return orjson.dumps({"predictions": model_call(data).tolist()})

    return (lambda: model_call(array)), full


def tf_floor_calls(model_dir: Path, body: bytes) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The in-process floor for a SavedModel (issue 21: the signature call on the same batch):
    the `serving_default` signature alone on a ready float32 tensor, and orjson decode +
    `np.asarray(float32)` + signature + orjson encode. Imports TensorFlow into this process:
    called only in the TensorFlow phase, after the other scenarios."""
    import orjson
    import tensorflow as tf

    signature = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    (name,) = signature.structured_input_signature[1]
    (output,) = signature.structured_outputs
    tensor = tf.constant(np.asarray(orjson.loads(body)["instances"], np.float32))

    def full() -> bytes:
        rows = tf.constant(np.asarray(orjson.loads(body)["instances"], np.float32))
        return orjson.dumps({"predictions": signature(**{name: rows})[output].numpy().tolist()})

    def alone() -> Any:
        return signature(**{name: tensor})[output].numpy()

    return alone, full


TF_REFERENCE = """
import json, sys
import numpy as np
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
rows = np.asarray(json.load(sys.stdin), np.float32)
out = model.signatures["serving_default"](x=tf.constant(rows))["score"].numpy()
print(json.dumps(out.tolist()))
"""  # both exports: input x [?, 30] float32, output score [?]


def tf_reference(model_dir: Path, rows: list[list[float]]) -> list[float]:
    """The SavedModel's answers, computed in a child process so TensorFlow stays out of this one."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", TF_REFERENCE, str(model_dir)], check=True,
                         input=json.dumps(rows), capture_output=True, text=True, timeout=300)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def levers(model_dir: Path, rows: list[list[float]]) -> dict[str, float]:
    """In-process before/after of three levers (best of 15, seconds).

    - JSON: the standard library's json against wirejson (orjson) for the 10,000-instance body.
    - Instances to an array: orjson + np.asarray against wirearray (simdjson straight into the
      array), same body.
    - Serving-version lookup: a full store read against the per-thread cache behind the store's
      change token (registry/lookup.py), for one version in a fresh SQLite store.
    """
    import json
    import tempfile

    import numpy as np

    from core import wirejson
    from core.payloads import ModelRef
    from protocols import wirearray
    from registry import lookup
    from registry.resources import Model, Version
    from registry.store import SqliteStore

    body = json.dumps({"instances": rows}).encode()

    def best(fn: Callable[[], Any], n: int = 15) -> float:
        fn()
        runs = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - start)
        return min(runs)

    out = {"json_stdlib_decode_s": best(lambda: json.loads(body)),
           "json_wirejson_decode_s": best(lambda: wirejson.loads(body))}
    out["array_asarray_s"] = best(lambda: np.asarray(wirejson.loads(body)["instances"]))
    out["array_wirearray_s"] = best(lambda: wirearray.instances_array(body))
    answer = {"predictions": [0.5] * len(rows)}
    out["json_stdlib_encode_s"] = best(lambda: json.dumps(answer).encode())
    out["json_wirejson_encode_s"] = best(lambda: wirejson.dumps(answer))
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "db.sqlite3")
        store.put_model(Model(name="projects/p/models/m", default_version="v1"))
        store.put_version(Version(name="projects/p/models/m/versions/v1", deployment_uri=str(model_dir),
                                  state="READY"))
        ref = ModelRef("p", "m")
        out["lookup_store_read_s"] = best(lambda: [lookup._serving_version(store, ref)
                                                   for _ in range(1000)]) / 1000
        out["lookup_cached_s"] = best(lambda: [lookup.serving_version(store, ref)
                                               for _ in range(1000)]) / 1000
        store.close()
    return out
