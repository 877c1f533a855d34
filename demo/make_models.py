"""Train the demo models `make serve` bundles into the local state folder (skipped when present).

They land in mlemu-state/demo-models/, which demo/bootstrap.yaml points at;
`python demo/make_models.py OUT` writes them to OUT instead. TensorFlow is imported for
`half_plus_three` only.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import joblib
import numpy as np

OUT = Path(__file__).resolve().parent.parent / "mlemu-state" / "demo-models"


def half_plus_three(target: Path) -> None:
    """y = 0.5 * x + 3, exported the way TF Serving's testdata half_plus_two/three are
    (tensorflow_serving/servables/tensorflow/testdata/saved_model_half_plus_two.py): a TF1
    SavedModelBuilder export whose `x` is feature "x" parsed from serialized tf.Example, static
    shape [?, 1]; `serving_default` predicts y from x, `tensorflow/serving/regress` reads the
    tf.Example."""
    import shutil

    import tensorflow as tf

    shutil.rmtree(target, ignore_errors=True)  # the builder refuses an existing directory
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        a = v1.get_variable("a", initializer=0.5)
        b = v1.get_variable("b", initializer=3.0)
        examples = v1.placeholder(tf.string, [None], name="tf_example")
        parsed = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        x = tf.identity(parsed["x"], name="x")
        y = tf.identity(a * x + b, name="y")
        builder = v1.saved_model.Builder(str(target))
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": v1.saved_model.predict_signature_def({"x": x}, {"y": y}),
                "tensorflow/serving/regress": v1.saved_model.regression_signature_def(examples, y),
            })
        builder.save()


#: census_xgb's AI Explanations metadata (the format: explainers/metadata.py): the row is the one
#: input, its three features attributed against an all-zero baseline; the output is the
#: probability XGBoost predicts.
CENSUS_EXPLANATION = {
    "inputs": {"features": {"index_feature_mapping": ["f0", "f1", "f2"]}},
    "outputs": {"probability": {}},
    "framework": "xgboost",
}


def main(out: Path = OUT) -> None:
    write_explanation_metadata(out)
    if not (out / "half_plus_three" / "saved_model.pb").exists():
        try:
            half_plus_three(out / "half_plus_three")
        except ImportError:
            print("TensorFlow is not installed: skipping half_plus_three", file=sys.stderr)
    if (out / ".complete").exists():
        return
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out.mkdir(parents=True, exist_ok=True)
    x, y = load_iris(return_X_y=True)
    for name, model in (
        ("iris_v1", make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))),
        ("iris_v2", RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0)),
    ):
        (out / name).mkdir(exist_ok=True)
        joblib.dump(model.fit(x, y), out / name / "model.joblib")

    import xgboost as xgb

    rng = np.random.default_rng(0)
    features = rng.normal(size=(500, 3))
    labels = (features[:, 0] + features[:, 1] > 0).astype(int)
    features[rng.random(features.shape) < 0.2] = np.nan  # train with missing values
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3},
                        xgb.DMatrix(features, label=labels, missing=np.nan), num_boost_round=20)
    (out / "census_xgb").mkdir(exist_ok=True)
    booster.save_model(out / "census_xgb" / "model.ubj")
    (out / "census_xgb" / "model.ubj").rename(out / "census_xgb" / "model.bst")

    (out / "threshold").mkdir(exist_ok=True)
    with open(out / "threshold" / "model.pkl", "wb") as f:
        pickle.dump(LogisticRegression().fit(x[y < 2], y[y < 2]), f)
    (out / ".complete").touch()
    print(f"demo models written to {out}", file=sys.stderr)


def write_explanation_metadata(out: Path) -> None:
    """Written on every run (it is tiny), so a state folder trained before census_xgb was
    explainable gains it without retraining."""
    import json

    (out / "census_xgb").mkdir(parents=True, exist_ok=True)
    (out / "census_xgb" / "explanation_metadata.json").write_text(json.dumps(CENSUS_EXPLANATION))


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else OUT)
