"""Train the demo models `make serve` bundles into the local state folder (skipped when present).

They land in mlemu-state/demo-models/, which demo/bootstrap.yaml points at.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import joblib
import numpy as np

OUT = Path(__file__).resolve().parent.parent / "mlemu-state" / "demo-models"


def main() -> None:
    if (OUT / ".complete").exists():
        return
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    OUT.mkdir(parents=True, exist_ok=True)
    x, y = load_iris(return_X_y=True)
    for name, model in (
        ("iris_v1", make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))),
        ("iris_v2", RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0)),
    ):
        (OUT / name).mkdir(exist_ok=True)
        joblib.dump(model.fit(x, y), OUT / name / "model.joblib")

    import xgboost as xgb

    rng = np.random.default_rng(0)
    features = rng.normal(size=(500, 3))
    labels = (features[:, 0] + features[:, 1] > 0).astype(int)
    features[rng.random(features.shape) < 0.2] = np.nan  # train with missing values
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3},
                        xgb.DMatrix(features, label=labels, missing=np.nan), num_boost_round=20)
    (OUT / "census_xgb").mkdir(exist_ok=True)
    booster.save_model(OUT / "census_xgb" / "model.ubj")
    (OUT / "census_xgb" / "model.ubj").rename(OUT / "census_xgb" / "model.bst")

    (OUT / "threshold").mkdir(exist_ok=True)
    with open(OUT / "threshold" / "model.pkl", "wb") as f:
        pickle.dump(LogisticRegression().fit(x[y < 2], y[y < 2]), f)
    (OUT / ".complete").touch()
    print(f"demo models written to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
