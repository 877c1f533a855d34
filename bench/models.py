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
}
PEER_MODELS = ("logreg", "forest", "xgb")


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
    dirs = {name: root / name for name in MODELS if with_tf or name != "tf"}
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
        _build_tf(dirs["tf"], x, y)
    return dirs


def _build_tf(directory: Path, x: np.ndarray, y: np.ndarray) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(SEED)
    w1 = tf.constant(rng.normal(scale=0.2, size=(FEATURES, 64)), tf.float32)
    b1 = tf.constant(np.zeros(64), tf.float32)
    w2 = tf.constant(rng.normal(scale=0.2, size=(64, 1)), tf.float32)

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


TF_REFERENCE = """
import json, sys
import numpy as np
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
rows = np.asarray(json.load(sys.stdin), np.float32)
out = model.signatures["serving_default"](x=tf.constant(rows))["score"].numpy()
print(json.dumps(out.tolist()))
"""


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

    import wirearray
    import wirejson
    from payloads import ModelRef
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
