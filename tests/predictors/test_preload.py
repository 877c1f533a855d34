"""Preloading frameworks in gunicorn's master: which ones, and that it starts no thread."""

import json
import subprocess
import sys
from typing import Any

from registry import bootstrap
from tests.conftest import ROOT
from tests.kit import modelkit, tfmodels


def run_fresh(code: str) -> Any:
    """Run `code` in a fresh interpreter (nothing imported yet); the JSON its last line prints.
    The timeout bounds a hang (a fork-unsafe library), it is no speed target."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env=env, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_frameworks_of_a_bootstrap_file(tmp_path):
    modelkit.sklearn_model(tmp_path / "sk", "logreg")
    modelkit.xgboost_model(tmp_path / "xgb")
    modelkit.custom_model_dir(tmp_path / "custom", 2.0)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": "sk"}}},  # detected from model.joblib
        "xgb": {"versions": {"v1": {"deploymentUri": "xgb"}}},  # detected from model.bst
        "tf": {"versions": {"v1": {"deploymentUri": "nowhere", "framework": "tensorflow"}}},
        "custom": {"versions": {"v1": {"deploymentUri": "custom", "predictionClass": "m.P"}}},
    })
    assert bootstrap.frameworks(config) == {"SCIKIT_LEARN", "XGBOOST", "TENSORFLOW"}
    assert bootstrap.frameworks(None) == set()
    (tmp_path / "bad.yaml").write_text("projects: [")
    assert bootstrap.frameworks(tmp_path / "bad.yaml") == set()  # the workers report it


def test_preload_imports_frameworks_without_starting_threads():
    code = (
        "import json, os, sys\n"
        "from predictors.preload import preload, threads\n"
        "before = threads()\n"
        "done = preload(['SCIKIT_LEARN', 'XGBOOST', 'TENSORFLOW'], os.environ)\n"
        "print(json.dumps({'before': before, 'after': threads(), 'done': done,\n"
        "                  'blas': os.environ.get('OPENBLAS_NUM_THREADS'),\n"
        "                  'tf': 'tensorflow' in sys.modules, 'sk': 'sklearn.base' in sys.modules}))\n"
    )
    result = run_fresh(code)
    assert result["after"] == result["before"]  # safe to fork: no pool was started
    assert result["blas"] == "1" and result["sk"] and result["tf"]
    assert {"xgboost", "predictors.sklearn", "tensorflow", "predictors.tensorflow"} <= set(
        result["done"])


def test_workers_forked_after_tensorflow_is_preloaded_serve_a_saved_model(tmp_path):
    """TensorFlow imported in the master (as gunicorn.conf.py does for a bootstrap file with a
    TENSORFLOW version), then two children forked as gunicorn forks its workers: each loads a
    SavedModel and predicts with the right answer (its session's thread pools start after the
    fork, in the child). A hang would end at the bound, never pass."""
    tfmodels.half_plus_two(tmp_path / "hp2")
    code = (
        "import json, os, sys\n"
        "from predictors.preload import preload, threads\n"
        "preload(['TENSORFLOW'], os.environ)\n"
        "assert threads() == 1\n"
        "children = []\n"
        "for n in range(2):\n"
        "    read, write = os.pipe()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.close(read)\n"
        "        from predictors.tensorflow import TensorFlowPredictor\n"
        f"        model = TensorFlowPredictor.from_path({str(tmp_path / 'hp2')!r})\n"
        "        answer = model.predict([[1.0], [4.0 + n]])\n"
        "        os.write(write, json.dumps([float(v[0]) for v in answer]).encode())\n"
        "        os._exit(0)\n"
        "    os.close(write)\n"
        "    children.append((pid, read))\n"
        "answers = []\n"
        "for pid, read in children:\n"
        "    answers.append(json.loads(os.read(read, 1000)))\n"
        "    assert os.waitpid(pid, 0)[1] == 0\n"
        "print(json.dumps(answers))\n"
    )
    assert run_fresh(code) == [[2.5, 4.0], [2.5, 4.5]]


def test_app_modules_import_without_threads_or_the_app():
    """gunicorn's master imports the app's modules before forking: nothing may start or open.
    Threads are counted in the OS (numpy's OpenBLAS pool is no Python thread)."""
    code = (
        "import json, os, sys\n"
        "import app\n"
        "from predictors.preload import single_threaded_blas, threads\n"
        "single_threaded_blas(os.environ)\n"
        "app.import_app_modules()\n"
        "print(json.dumps({'threads': threads(), 'numpy': 'numpy' in sys.modules,\n"
        "                  'built': 'app' in vars(app), 'flask': 'flask' in sys.modules,\n"
        "                  'tf': 'tensorflow' in sys.modules, 'sk': 'sklearn' in sys.modules}))\n"
    )
    result = run_fresh(code)
    assert result == {"threads": 1, "numpy": True, "built": False, "flask": True, "tf": False,
                      "sk": False}


def test_gunicorn_master_forks_with_one_thread(tmp_path):
    """deploy/gunicorn.conf.py as gunicorn's master runs it, with scikit-learn and XGBoost
    versions to preload: the process it forks the workers from has one OS thread."""
    modelkit.sklearn_model(tmp_path / "sk", "logreg")
    modelkit.xgboost_model(tmp_path / "xgb")
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}},
        "xgb": {"versions": {"v1": {"deploymentUri": str(tmp_path / "xgb")}}},
    })
    code = (
        "import json, os, runpy, sys\n"
        f"os.environ.update(MLEMU_CONFIG={str(config)!r}, MLEMU_STATE_DIR={str(tmp_path)!r})\n"
        f"runpy.run_path({str(ROOT / 'deploy' / 'gunicorn.conf.py')!r})\n"
        "from predictors.preload import threads\n"
        "print(json.dumps({'threads': threads(), 'blas': os.environ.get('OPENBLAS_NUM_THREADS'),\n"
        "                  'loaded': [m for m in ('numpy', 'sklearn.base', 'xgboost', 'flask')\n"
        "                             if m in sys.modules]}))\n"
    )
    result = run_fresh(code)
    assert result == {"threads": 1, "blas": "1",
                      "loaded": ["numpy", "sklearn.base", "xgboost", "flask"]}


def test_the_cli_starts_without_flask_or_requests():
    code = "import json, sys\nimport app\nprint(json.dumps(sorted({'flask', 'requests'} & set(sys.modules))))"
    assert run_fresh(code) == []
