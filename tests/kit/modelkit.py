"""Tiny models built at test time (nothing binary is committed), and bootstrap files for them."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import yaml

RNG_SEED = 0


def training_data(n: int = 200, features: int = 4, seed: int = RNG_SEED) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
    return x, y


def sklearn_model(directory: Path, kind: str = "logreg", features: int = 4, seed: int = 0,
                  filename: str = "model.joblib") -> Any:
    """Train a small scikit-learn model into `directory/filename`; returns the estimator."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = training_data(features=features, seed=seed)
    model = {
        "logreg": lambda: LogisticRegression(),
        "linreg": lambda: LinearRegression(),
        "forest": lambda: RandomForestClassifier(n_estimators=10, max_depth=3, random_state=seed),
        "pipeline": lambda: make_pipeline(StandardScaler(), LogisticRegression()),
    }[kind]()
    target = x @ np.arange(1, features + 1) if kind == "linreg" else y
    model.fit(x, target)
    directory.mkdir(parents=True, exist_ok=True)
    if filename.endswith(".pkl"):
        with open(directory / filename, "wb") as f:
            pickle.dump(model, f)
    else:
        joblib.dump(model, directory / filename)
    return model


def xgboost_model(directory: Path, features: int = 3, rounds: int = 10,
                  filename: str = "model.bst") -> Any:
    """Train an XGBoost booster with missing values in the training data."""
    import xgboost as xgb

    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, features))
    y = (x[:, 0] - x[:, 1] > 0).astype(int)
    x[rng.random(x.shape) < 0.25] = np.nan
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1},
                        xgb.DMatrix(x, label=y, missing=np.nan), num_boost_round=rounds)
    directory.mkdir(parents=True, exist_ok=True)
    if filename == "model.bst":
        booster.save_model(directory / "model.ubj")  # UBJSON, what XGBoost writes by default
        (directory / "model.ubj").rename(directory / filename)
    else:
        joblib.dump(booster, directory / filename)
    return booster


CUSTOM_PREDICTOR_SOURCE = '''
import os
import pickle


class ScalePredictor:
    """Multiplies the sum of each instance by the model's factor; honours a threshold kwarg."""

    def __init__(self, factor):
        self.factor = factor

    @classmethod
    def from_path(cls, model_dir):
        with open(os.path.join(model_dir, "factor.pkl"), "rb") as f:
            return cls(pickle.load(f))

    def predict(self, instances, threshold=None, **kwargs):
        scores = [self.factor * sum(row) for row in instances]
        if threshold is None:
            return scores
        return [{"score": s, "above": s > threshold, "kwargs": sorted(kwargs)} for s in scores]
'''


def custom_package(root: Path, module: str = "scale_predictor", source: str = CUSTOM_PREDICTOR_SOURCE,
                   kind: str = "sdist") -> Path:
    """A custom predictor package as a directory, an sdist (.tar.gz) or a wheel."""
    src = root / f"{module}_src"
    src.mkdir(parents=True, exist_ok=True)
    (src / f"{module}.py").write_text(textwrap.dedent(source))
    (src / "setup.py").write_text(
        f"from setuptools import setup\nsetup(name='{module}', version='0.1', py_modules=['{module}'])\n"
    )
    if kind == "dir":
        return src
    dist = root / f"{module}_dist"
    if kind == "sdist":
        subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(dist)],
                       cwd=src, check=True, capture_output=True)
        return next(dist.glob("*.tar.gz"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(dist), str(src)], check=True, capture_output=True)
    return next(dist.glob("*.whl"))


def custom_model_dir(directory: Path, factor: float = 2.0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "factor.pkl", "wb") as f:
        pickle.dump(factor, f)
    return directory


def bootstrap_file(path: Path, models: dict[str, dict[str, Any]], project: str = "p") -> Path:
    """Write a bootstrap YAML: models = {model: {"versions": {v: {...}}, ...}}."""
    path.write_text(yaml.safe_dump({"projects": {project: {"models": models}}}))
    return path
