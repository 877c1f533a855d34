"""The framework modules a pickled model's classes live in, read from its file without unpickling.

A scikit-learn estimator's pickle names its class's module (`sklearn.linear_model._logistic`),
which unpickling imports; importing that subpackage takes a noticeable share of a short job
(bench/notes/batch-jobs.md, "The model's own modules"). The warm job runner (batch/runner.py)
imports the modules named here before it forks a job, so the job, its fork server and every
worker start with them, and only the runner's first job of a model class pays for them.

Only names under the frameworks' own packages are returned (a pickle's other globals, user
code above all, are left to the worker's unpickling), from the first SCAN_BYTES of the file:
pickle protocols 2-5 write module names as plain text before the data that uses them.
"""

from __future__ import annotations

import os
import re

from core.errors import ModelLoadError
from predictors import find_model_file

#: Packages whose submodules the runner may import ahead of a job.
PACKAGES = ("sklearn", "xgboost")
SCAN_BYTES = 1 << 20
MAX_MODULES = 32
_PICKLES = (".pkl", ".joblib")
_NAME = re.compile(rb"(?<![A-Za-z0-9_.])(?:" + b"|".join(p.encode() for p in PACKAGES)
                   + rb")(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def pickled_modules(path: str) -> list[str]:
    """Dotted module names under PACKAGES that the pickle at `path` mentions (at most
    MAX_MODULES, sorted); [] for a file that is not a pickle or cannot be read."""
    if not path.endswith(_PICKLES):
        return []
    try:
        with open(path, "rb") as handle:
            data = handle.read(SCAN_BYTES)
    except OSError:
        return []
    return sorted({name.decode("ascii") for name in _NAME.findall(data)})[:MAX_MODULES]


def model_modules(model_dir: str, framework: str = "") -> list[str]:
    """pickled_modules of the model file in the local directory `model_dir` ([] for a remote
    one, gs://: its workers download it, or a directory without one model file)."""
    if "://" in model_dir or not os.path.isdir(model_dir):
        return []
    try:
        path, _ = find_model_file(model_dir, framework or None)
    except ModelLoadError:
        return []
    return pickled_modules(path)
