"""The project's own fixtures: the model it serves, built once, and the bootstrap file that
makes mlemu serve it (overriding pytest-mlemu's `mlemu_bootstrap`)."""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression


@pytest.fixture(scope="session")
def mlemu_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 4))
    (root / "churn").mkdir()
    joblib.dump(LogisticRegression().fit(x, (x[:, 0] > 0).astype(int)),
                root / "churn" / "model.joblib")
    config = root / "bootstrap.yaml"
    config.write_text(f"""
projects:
  shop:
    models:
      churn:
        versions:
          v1:
            deploymentUri: {root / "churn"}
""")
    return config
