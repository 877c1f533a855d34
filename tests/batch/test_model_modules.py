"""The model's own modules, imported by the warm runner ahead of a job (batch/model_modules.py,
batch/runner.py `import_ahead`): read from the pickle without unpickling it, framework packages
only; the runner imports them before it forks, so the job's processes inherit them.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from batch.launcher import Run
from batch.model_modules import model_modules, pickled_modules
from batch.runners import Runners
from batch.spec import JobSpec
from tests.kit import batchkit, modelkit

ROOT = Path(__file__).resolve().parents[2]


class UserScaler:  # a user's class in a pickle: its module is left to the worker's unpickling
    def __init__(self, factor: float) -> None:
        self.factor = factor


@pytest.mark.parametrize("filename", ["model.joblib", "model.pkl"])
def test_a_pickled_pipeline_names_each_estimators_module(tmp_path: Path, filename: str) -> None:
    modelkit.sklearn_model(tmp_path, kind="pipeline", filename=filename)
    names = pickled_modules(str(tmp_path / filename))
    assert {"sklearn.linear_model._logistic", "sklearn.pipeline",
            "sklearn.preprocessing._data"} <= set(names)
    assert all(name.startswith(("sklearn.", "xgboost.")) for name in names)
    assert model_modules(str(tmp_path), "SCIKIT_LEARN") == names


def test_only_framework_packages_are_named(tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression

    (tmp_path / "model.pkl").write_bytes(pickle.dumps({"scale": UserScaler(2.0),
                                                       "model": LogisticRegression()}))
    names = pickled_modules(str(tmp_path / "model.pkl"))
    assert "sklearn.linear_model._logistic" in names
    assert not any("test_model_modules" in name for name in names)


def test_nothing_is_named_for_other_files_and_remote_or_missing_models(tmp_path: Path) -> None:
    modelkit.xgboost_model(tmp_path / "xgb")
    assert model_modules(str(tmp_path / "xgb"), "XGBOOST") == []  # a booster file, not a pickle
    assert model_modules("gs://bucket/model", "SCIKIT_LEARN") == []
    assert model_modules(str(tmp_path / "absent"), "SCIKIT_LEARN") == []
    (tmp_path / "empty").mkdir()
    assert model_modules(str(tmp_path / "empty"), "SCIKIT_LEARN") == []
    (tmp_path / "model.pkl").write_bytes(b"\x00" * 64)
    assert pickled_modules(str(tmp_path / "model.pkl")) == []


def test_import_ahead_imports_submodules_of_imported_packages_only() -> None:
    script = (
        "import json, sys\n"
        "import sklearn\n"
        "from batch.runner import import_ahead\n"
        "import_ahead(['sklearn.linear_model', 'sklearn.no_such_module', 'xgboost.sklearn', 7])\n"
        "print(json.dumps({name: name in sys.modules for name in "
        "('sklearn.linear_model', 'xgboost', 'xgboost.sklearn')}))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    assert json.loads(out.stdout) == {"sklearn.linear_model": True, "xgboost": False,
                                      "xgboost.sklearn": False}


@pytest.mark.slow
def test_the_warm_runner_holds_the_models_modules_after_its_first_job(tmp_path: Path) -> None:
    modelkit.sklearn_model(tmp_path / "model")  # LogisticRegression: sklearn.linear_model
    (tmp_path / "in.json").write_text("".join(json.dumps([float(i), 0.0, 1.0, 2.0]) + "\n"
                                              for i in range(20)))
    spec = JobSpec(input_paths=[str(tmp_path / "in.json")], data_format="JSON",
                   output_path=str(tmp_path / "out"), model_dir=str(tmp_path / "model"),
                   framework="SCIKIT_LEARN", batch_size=8, workers=1)
    pool = Runners(tmp_path / "jobs", 600.0)
    try:
        run = Run(spec, tmp_path / "job", pool)
        assert run.proc.wait(timeout=120) == 0
        assert run.result() == {"predictions": 20, "errors": 0}
        assert len(batchkit.results(batchkit.local_outputs(tmp_path / "out"))) == 20
        [runner] = pool.running()
        # linear_model's compiled extensions are mapped in the runner itself, not only in the
        # job it forked: scikit-learn's base modules (what the runner starts with) import none.
        maps = Path(f"/proc/{runner.proc.pid}/maps").read_text()
        assert "sklearn/linear_model/_" in maps
    finally:
        pool.close()
