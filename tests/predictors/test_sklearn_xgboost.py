"""Built-in frameworks: file rules, detection, predict semantics, and errors."""

import math

import numpy as np
import pytest

import predictors
from core.errors import ModelLoadError, PredictionFailed
from tests.kit import modelkit


def test_sklearn_joblib_and_pkl_predict_like_the_estimator(tmp_path):
    for filename in ("model.joblib", "model.pkl"):
        est = modelkit.sklearn_model(tmp_path / filename, "pipeline", filename=filename)
        predictor, framework = predictors.load(str(tmp_path / filename))
        assert framework == "SCIKIT_LEARN"
        x = modelkit.training_data(n=5, seed=7)[0]
        assert predictor.predict(x.tolist()) == est.predict(x).tolist()


def test_sklearn_uses_predict_not_predict_proba(tmp_path):
    modelkit.sklearn_model(tmp_path, "logreg")
    predictor, _ = predictors.load(str(tmp_path), "SCIKIT_LEARN")
    out = predictor.predict([[3, 0, 0, 0], [-3, 0, 0, 0]])
    assert out == [1, 0]


def test_sklearn_wrong_feature_count_is_prediction_failed(tmp_path):
    modelkit.sklearn_model(tmp_path, "logreg")
    predictor, _ = predictors.load(str(tmp_path))
    with pytest.raises(PredictionFailed) as err:
        predictor.predict([[1.0, 2.0]])
    assert err.value.message.startswith("Prediction failed: Exception during sklearn prediction:")
    assert "4 features" in err.value.message


def test_more_than_one_model_file_is_named(tmp_path):
    modelkit.sklearn_model(tmp_path, filename="model.joblib")
    modelkit.sklearn_model(tmp_path, filename="model.pkl")
    with pytest.raises(ModelLoadError) as err:
        predictors.load(str(tmp_path))
    assert "model.joblib" in err.value.message and "model.pkl" in err.value.message


def test_missing_model_file_and_directory(tmp_path):
    with pytest.raises(ModelLoadError, match="Could not find a model file"):
        predictors.load(str(tmp_path))
    with pytest.raises(ModelLoadError, match="does not exist"):
        predictors.load(str(tmp_path / "nope"))


def test_corrupt_model_file(tmp_path):
    (tmp_path / "model.joblib").write_bytes(b"not a pickle")
    with pytest.raises(ModelLoadError, match="Could not load the model"):
        predictors.load(str(tmp_path))


def test_framework_mismatch_is_refused(tmp_path):
    modelkit.xgboost_model(tmp_path)
    with pytest.raises(ModelLoadError, match="SCIKIT_LEARN cannot serve model.bst"):
        predictors.load(str(tmp_path), "SCIKIT_LEARN")


def test_xgboost_nan_and_null_mean_missing(tmp_path):
    import xgboost as xgb

    booster = modelkit.xgboost_model(tmp_path)
    predictor, framework = predictors.load(str(tmp_path))
    assert framework == "XGBOOST"
    rows = [[0.0, 1.1, float("nan")], [0.5, None, -0.3], [1.0, -1.0, 0.2]]
    expected = booster.predict(
        xgb.DMatrix(np.array(rows, dtype=np.float32), missing=np.nan)
    ).tolist()
    assert predictor.predict(rows) == expected
    # The missing feature really is treated as missing (not as 0.0).
    zeroed = booster.predict(xgb.DMatrix(np.array([[0.5, 0.0, -0.3]], dtype=np.float32))).tolist()
    assert predictor.predict([[0.5, None, -0.3]]) == expected[1:2]
    assert all(0.0 <= p <= 1.0 and not math.isnan(p) for p in expected)
    assert isinstance(zeroed[0], float)


def test_xgboost_pickled_booster_and_estimator_detected(tmp_path):
    import joblib
    from xgboost import XGBClassifier

    booster = modelkit.xgboost_model(tmp_path / "b", filename="model.joblib")
    predictor, framework = predictors.load(str(tmp_path / "b"))
    assert framework == "XGBOOST"
    assert len(predictor.predict([[0.1, 0.2, 0.3]])) == 1
    x, y = modelkit.training_data(n=50, features=3)
    est = XGBClassifier(n_estimators=5, max_depth=2).fit(x, y)
    (tmp_path / "e").mkdir()
    joblib.dump(est, tmp_path / "e" / "model.joblib")
    predictor, framework = predictors.load(str(tmp_path / "e"))
    assert framework == "XGBOOST"
    np.testing.assert_allclose(predictor.predict(x[:3].tolist()), est.predict_proba(x[:3])[:, 1],
                               rtol=1e-6)
    assert booster is not None


def test_xgboost_wrong_feature_count(tmp_path):
    modelkit.xgboost_model(tmp_path)
    predictor, _ = predictors.load(str(tmp_path))
    with pytest.raises(PredictionFailed, match="Exception during xgboost prediction"):
        predictor.predict([[1.0, 2.0, 3.0, 4.0, 5.0]])
    with pytest.raises(PredictionFailed, match="list of features"):
        predictor.predict([1.0, 2.0, 3.0])


def test_signatures_report_feature_counts(tmp_path):
    modelkit.sklearn_model(tmp_path / "s", "logreg", features=4)
    modelkit.xgboost_model(tmp_path / "x", features=3)
    sk, _ = predictors.load(str(tmp_path / "s"))
    xg, _ = predictors.load(str(tmp_path / "x"))
    assert sk.signature().inputs[0].shape == (-1, 4)
    assert sk.signature().outputs[0].datatype == "INT64"
    assert xg.signature().inputs[0].shape == (-1, 3)


@pytest.mark.parametrize("rows", [
    [[1.0, 2.5], [3.0, -4.0]],
    [[1, 2], [3, 4]],
    [[True, 2.0], [None, "1.5"]],  # asarray with a dtype: bool -> 1, None -> NaN, "1.5" -> 1.5
    [[1e30, -1e-300], [float("nan"), float("inf")]],
    [[1.0, 2.0]],
])
def test_float32_rows_converts_like_asarray(rows, monkeypatch):
    from predictors import xgboost as xgb_predictor
    from predictors.xgboost import float32_rows

    monkeypatch.setattr(xgb_predictor, "FAST_CONVERT_ROWS", 1)  # the fromiter path, small rows
    got, want = float32_rows(rows), np.asarray(rows, dtype=np.float32)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rows", [
    [[1.0, 2.0], [3.0]],  # ragged
    [[1.0, 2.0, 3.0], [4.0]],  # ragged with a total that fills 2 x 2
    [[1.0, "x"], [2.0, 3.0]],
    [[1.0, [2.0]], [3.0, 4.0]],
    [{"a": 1.0}, {"a": 2.0}],
])
def test_float32_rows_fails_like_asarray(rows, monkeypatch):
    from predictors import xgboost as xgb_predictor
    from predictors.xgboost import float32_rows

    monkeypatch.setattr(xgb_predictor, "FAST_CONVERT_ROWS", 1)
    with pytest.raises(Exception) as want:
        np.asarray(rows, dtype=np.float32)
    with pytest.raises(type(want.value)):
        float32_rows(rows)


def test_xgboost_large_calls_use_every_cpu_one_at_a_time(tmp_path, monkeypatch):
    import threading

    import xgboost as xgb

    from predictors import xgboost as xgb_predictor

    booster = modelkit.xgboost_model(tmp_path)
    predictor, _ = predictors.load(str(tmp_path))
    predictor._wide_nthread = 2  # as on a 2-CPU machine, whatever this one has
    rows = np.random.default_rng(0).normal(size=(xgb_predictor.WIDE_CALL_ROWS, 3))
    want = booster.predict(xgb.DMatrix(rows.astype(np.float32), missing=np.nan)).tolist()
    assert predictor.predict(rows[:10].tolist()) == want[:10]
    assert predictor._wide_booster is None  # small calls keep the 1-thread booster
    assert predictor.predict(rows.tolist()) == want
    wide = predictor._wide_booster
    assert wide is not None
    assert '"nthread":"2"' in wide.save_config().replace(" ", "")
    assert '"nthread":"1"' in predictor._booster.save_config().replace(" ", "")
    # While one large call holds the wide booster, another runs on the 1-thread one.
    predictor._wide_lock.acquire()
    try:
        used = []
        real_run = predictor._run
        monkeypatch.setattr(predictor, "_run", lambda b, *a: used.append(b) or real_run(b, *a))
        assert predictor.predict(rows.tolist()) == want
        assert used == [predictor._booster]
    finally:
        predictor._wide_lock.release()
    results = []
    threads = [threading.Thread(target=lambda: results.append(predictor.predict(rows.tolist())))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 4


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "max_depth": 3},
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 4},
    {"objective": "reg:squarederror", "max_depth": 6},
    {"objective": "binary:logistic", "booster": "dart", "rate_drop": 0.3},
    {"objective": "reg:squarederror", "booster": "gblinear"},
])
def test_xgboost_answers_as_through_a_dmatrix(tmp_path, params):
    """Tree boosters predict in place (no DMatrix): the same float32 outputs, NaN as missing,
    one row and many; other booster types take the DMatrix path."""
    import xgboost as xgb

    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, 5))
    y = rng.integers(0, params.get("num_class", 2), size=400)
    x[rng.random(x.shape) < 0.2] = np.nan
    booster = xgb.train({**params, "nthread": 1}, xgb.DMatrix(x, label=y, missing=np.nan),
                        num_boost_round=15)
    booster.save_model(tmp_path / "model.json")
    (tmp_path / "model.json").rename(tmp_path / "model.bst")
    predictor, _ = predictors.load(str(tmp_path))
    assert predictor._inplace == (params.get("booster", "gbtree") == "gbtree")
    rows = rng.normal(size=(300, 5))
    rows[rng.random(rows.shape) < 0.3] = np.nan
    want = booster.predict(xgb.DMatrix(rows.astype(np.float32), missing=np.nan)).tolist()
    assert predictor.predict(rows) == want
    assert [predictor.predict(rows[i:i + 1])[0] for i in range(20)] == want[:20]
    listed = [[None if np.isnan(v) else float(v) for v in row] for row in rows[:20].tolist()]
    assert predictor.predict(listed) == want[:20]


_LOAD_THREADS = """
import os, sys, threading
import xgboost
import predictors
from predictors.base import PredictorOptions

def tasks():
    return len(os.listdir("/proc/self/task"))

before = tasks()
predictor, _ = predictors.load(sys.argv[1], options=PredictorOptions(xgboost_nthread=1))
serial = tasks()
seen = []
other = threading.Thread(target=lambda: seen.append(xgboost.get_config()["nthread"]))
other.start()
other.join()
# For contrast, a parse on every core, in this thread (libgomp ends a thread's OpenMP team when
# that thread exits, so a team started in a thread that has ended may already be gone): its
# parse starts OpenMP threads.
with xgboost.config_context(nthread=len(os.sched_getaffinity(0))):
    xgboost.Booster(model_file=os.path.join(sys.argv[1], "model.bst"))
print(before, serial, tasks(), seen[0], predictor.predict([[0.5, -0.5, 0.1]])[0])
"""


def test_a_booster_loads_on_xgboost_nthread_threads_only_in_the_loading_thread(tmp_path):
    """An XGBoost load with xgboost_nthread=1 starts no OpenMP threads, and leaves XGBoost's
    global thread count of other threads at its default; in a fresh process (OpenMP's threads,
    once started, stay)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import xgboost as xgb

    booster = modelkit.xgboost_model(tmp_path, rounds=40)
    done = subprocess.run([sys.executable, "-c", _LOAD_THREADS, str(tmp_path)],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          timeout=300, check=True)
    before, serial, parallel, others, answer = done.stdout.split()
    assert int(serial) == int(before)
    assert int(others) == 0
    want = booster.predict(xgb.DMatrix(np.array([[0.5, -0.5, 0.1]], dtype=np.float32)))[0]
    assert float(answer) == pytest.approx(float(want))
    if len(os.sched_getaffinity(0)) > 1:  # with one CPU XGBoost's default is one thread too
        assert int(parallel) > int(serial)
