"""Adaptive batching (predictors/batching.py): merging, grouping by layout, per-request errors,
concurrency, the idle pass-through, and which predictors are batched at all.

Batches are formed deterministically: a gated model call holds the predictor busy while the test
queues requests behind it, then opens the gate. No timing is asserted anywhere.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import dataplane
import predictors
from core.errors import PredictionFailed
from core.payloads import ANONYMOUS, ModelRef, PredictRequest
from predictors import batching
from tests.kit import mergekit, modelkit


def test_idle_request_runs_straight_through_on_its_own_thread():
    recorder = mergekit.Recorder()
    recorder.gate.set()
    batcher = batching.Batcher(recorder)
    assert batcher.predict([[1, 2], [3, 4]]) == [3, 7]
    assert recorder.calls == [[[1, 2], [3, 4]]]
    assert recorder.threads == [threading.get_ident()]
    assert batcher.merged_calls == 0 and not batcher._busy


def test_queued_requests_merge_and_each_gets_its_own_slice():
    recorder = mergekit.Recorder()
    batcher = batching.Batcher(recorder)
    requests = [[[0, 0]], [[1, 1]], [[2, 2], [3, 3]], [[4, 4]]]
    results = mergekit.queue_behind_busy_call(batcher, recorder, requests)
    assert results == {0: [0], 1: [2], 2: [4, 6], 3: [8]}
    assert len(recorder.calls) == 2  # the first alone, then one merged call for the three queued
    assert sorted(map(tuple, recorder.calls[1])) == [(1, 1), (2, 2), (3, 3), (4, 4)]
    assert batcher.merged_calls == 1 and not batcher._busy


class Observer:
    """A BatchObserver noting what the batcher reports."""

    def __init__(self):
        self.calls: list[tuple[str, int]] = []  # each timed model call: alone/merged, instances
        self.merged: list[list[int]] = []
        self.waits = 0

    def call_alone(self, seconds, instances):
        assert seconds >= 0
        self.calls.append(("alone", len(instances)))

    def call_merged(self, seconds, instances):
        assert seconds >= 0
        self.calls.append(("merged", len(instances)))

    def merged_call(self, sizes):
        self.merged.append(list(sizes))
        return contextlib.nullcontext()

    def waited(self, seconds):
        self.waits += 1


@pytest.mark.parametrize("times_calls", [True, False])
def test_the_batcher_times_each_model_call_once_when_asked(times_calls):
    """With `times_calls` (a built-in framework's predict, no timing wrapper of its own) every
    model call, alone, merged or failed, is reported once, as what it is (alone or merged:
    the observer reads no flag to tell); without it, none is (the wrapper around custom code
    reports its calls)."""
    recorder = mergekit.Recorder(lambda rows: [r[0] for r in rows] if all(r[0] >= 0 for r in rows)
                        else 1 / 0)
    observer = Observer()
    batcher = batching.Batcher(recorder, observer=observer, times_calls=times_calls)
    requests = [[[0, 0]], [[1, 1]], [[2, 2], [3, 3]]]
    assert mergekit.queue_behind_busy_call(batcher, recorder, requests) == {0: [0], 1: [1], 2: [2, 3]}
    with pytest.raises(ZeroDivisionError):
        batcher.predict([[-1, 0]])
    assert observer.merged == [[1, 2]] and observer.waits == 2
    assert observer.calls == ([("alone", 1), ("merged", 3), ("alone", 1)] if times_calls else [])


def test_a_failed_merged_call_is_reported_merged_and_its_reruns_alone():
    """A merged call that fails counts as one merged call; each request then runs again alone,
    and each of those calls counts as a call alone (its instances counted with it)."""
    recorder = mergekit.Recorder(lambda rows: [r[0] for r in rows] if all(r[0] >= 0 for r in rows)
                        else 1 / 0)
    observer = Observer()
    batcher = batching.Batcher(recorder, observer=observer, times_calls=True)
    results = mergekit.queue_behind_busy_call(batcher, recorder, [[[0, 0]], [[1, 1]], [[-1, 0]]])
    assert results[0] == [0] and results[1] == [1] and isinstance(results[2], ZeroDivisionError)
    assert observer.merged == [[1, 1]] and batcher.merged_calls == 0
    assert observer.calls == [("alone", 1), ("merged", 2), ("alone", 1), ("alone", 1)]


def test_batchers_call_a_built_in_predict_past_its_wrapper_only_when_they_time_it(tmp_path):
    """Batchers.get gives a built-in framework's batcher the class's own predict (the batcher
    times it) when metrics are recorded, and keeps the instance's (wrapped) predict otherwise."""
    modelkit.sklearn_model(tmp_path / "m", "logreg", features=2)
    predictor, _ = predictors.load(str(tmp_path / "m"))
    wrapped: list[int] = []
    own = predictor.predict
    predictor.predict = lambda instances: wrapped.append(len(instances)) or own(instances)
    observer = Observer()
    timed = batching.Batchers().get(predictor, observer=lambda: observer)
    timed.predict([[0.0, 1.0]])
    assert wrapped == [] and observer.calls == [("alone", 1)]
    untimed = batching.Batchers().get(predictor)
    untimed.predict([[0.0, 1.0]])
    assert wrapped == [1] and observer.calls == [("alone", 1)]


def test_mixed_shapes_in_one_window_are_grouped_by_layout():
    recorder = mergekit.Recorder()
    batcher = batching.Batcher(recorder)
    requests = [[[0, 0]], [[1, 1]], [[1, 1, 1]], [[2, 2]], [[2, 2, 2]], [[1.5, 1.5]], [[1, "a"]]]
    results = mergekit.queue_behind_busy_call(batcher, recorder, requests)
    assert results[1] == [2] and results[3] == [4] and results[5] == [3.0]
    assert results[2] == [3] and results[4] == [6]
    assert isinstance(results[6], TypeError)  # its own error; it was never merged with others
    widths = sorted(sorted({(len(r), type(r[1]).__name__) for r in call}) for call in recorder.calls[1:])
    # [1,1] and [2,2] (ints) merged; 3-wide rows merged; floats and the string row alone.
    assert widths == [[(2, "float")], [(2, "int")], [(2, "str")], [(3, "int")]]
    assert [len(c) for c in recorder.calls[1:] if len(c[0]) == 2 and type(c[0][1]) is int] == [2]


def test_bounded_batch_size():
    recorder = mergekit.Recorder()
    batcher = batching.Batcher(recorder, max_instances=4)
    requests = [[[0]], *[[[i], [i]] for i in range(1, 6)]]  # five queued requests of two rows
    results = mergekit.queue_behind_busy_call(batcher, recorder, requests)
    assert results == {0: [0], **{i: [i, i] for i in range(1, 6)}}
    assert [len(c) for c in recorder.calls] == [1, 4, 4, 2]
    assert recorder.calls[1] == [[1], [1], [2], [2]]  # arrival order kept


def test_large_and_irregular_requests_are_never_merged():
    recorder = mergekit.Recorder()
    recorder.gate.set()
    batcher = batching.Batcher(recorder, max_instances=4)
    assert batcher.predict([[1]] * 4) == [1] * 4
    assert batcher.predict([[1], [1, 2]]) == [1, 3]
    assert batching.layout([[1], [1, 2]]) is None
    assert batching.layout([{"a": 1}, {"a": 2}]) == batching.layout([{"a": 5}])
    assert batching.layout([{"a": 1}]) != batching.layout([{"b": 1}])
    assert not batcher._busy


def test_one_bad_request_in_a_batch_gets_its_own_error(tmp_path):
    model = modelkit.sklearn_model(tmp_path / "m", "logreg", features=2)
    predictor, _ = predictors.load(str(tmp_path / "m"))
    recorder = mergekit.Recorder(predictor.predict)
    batcher = batching.Batcher(recorder)
    good = [[[0.5, 1.0]], [[-1.0, 2.0], [3.0, -4.0]], [[2.0, 2.0]]]
    bad = [[float("nan"), 1.0]]  # same layout as the others; scikit-learn refuses NaN
    requests = [good[0], good[1], bad, good[2]]
    results = mergekit.queue_behind_busy_call(batcher, recorder, requests)
    assert isinstance(results[2], PredictionFailed)
    assert "NaN" in results[2].message
    for i, rows in ((0, good[0]), (1, good[1]), (3, good[2])):
        assert results[i] == model.predict(np.array(rows)).tolist()
    # The merged call failed, then each request ran alone.
    assert batcher.merged_calls == 0 and len(recorder.calls) == 2 + 3


def test_merged_call_with_the_wrong_number_of_predictions_falls_back():
    recorder = mergekit.Recorder(lambda rows: [len(rows)])  # one answer per call, not per instance
    batcher = batching.Batcher(recorder)
    results = mergekit.queue_behind_busy_call(batcher, recorder, [[[0]], [[1]], [[2]]])
    assert results == {0: [1], 1: [1], 2: [1]}
    assert batcher.merged_calls == 0


def test_many_threads_each_get_exactly_their_own_predictions(tmp_path):
    model = modelkit.sklearn_model(tmp_path / "m", "linreg", features=3)
    predictor, _ = predictors.load(str(tmp_path / "m"))
    batcher = batching.Batcher(predictor.predict, max_instances=16)
    rng = np.random.default_rng(7)

    def client(seed):
        rows = np.random.default_rng(seed).normal(size=(40, 3))
        got = []
        for start in range(0, 40, 1 + seed % 3):  # requests of 1 to 3 rows, in order
            chunk = rows[start:start + 1 + seed % 3].tolist()
            got.extend(batcher.predict(chunk))
        return rows, got

    with ThreadPoolExecutor(32) as pool:
        outcomes = list(pool.map(client, rng.integers(0, 10_000, size=64).tolist()))
    for rows, got in outcomes:
        assert got == pytest.approx(model.predict(rows).tolist(), rel=1e-12)
    assert not batcher._busy and not batcher._queue


OPT_IN_SOURCE = modelkit.CUSTOM_PREDICTOR_SOURCE.replace(
    "class ScalePredictor:", "class ScalePredictor:\n    batchable = True\n")


@pytest.fixture
def served(tmp_path, make_app):
    """An app with a scikit-learn version and two custom versions (one opted in to batching)."""
    modelkit.sklearn_model(tmp_path / "sk", "linreg", features=2)
    modelkit.custom_model_dir(tmp_path / "custom", 2.0)
    plain = modelkit.custom_package(tmp_path / "plain", kind="dir")
    opted = modelkit.custom_package(tmp_path / "opted", source=OPT_IN_SOURCE, kind="dir")
    custom = {"deploymentUri": "custom", "predictionClass": "scale_predictor.ScalePredictor"}
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": "sk"}}},
        "plain": {"versions": {"v1": {**custom, "packageUris": [str(plain)]}}},
        "opted": {"versions": {"v1": {**custom, "packageUris": [str(opted)]}}},
    })
    return make_app(config).emu


@pytest.mark.parametrize(("model", "batched"), [("sk", True), ("plain", False), ("opted", True)])
def test_dataplane_batches_built_ins_and_custom_predictors_that_opt_in(served, model, batched):
    ref = ModelRef("p", model)
    _, predictor = dataplane.resolve(served, ANONYMOUS, ref, "ml.models.predict")
    assert predictor.batchable is batched
    out = dataplane.predict(served, ANONYMOUS, ref, PredictRequest([[1.0, 2.0], [0.5, 0.5]], {}))
    assert len(out.predictions) == 2
    assert (served.deployments.batchers.existing(predictor) is not None) is batched


def test_requests_with_parameters_are_not_merged(served):
    ref = ModelRef("p", "opted")
    _, predictor = dataplane.resolve(served, ANONYMOUS, ref, "ml.models.predict")
    out = dataplane.predict(served, ANONYMOUS, ref, PredictRequest([[1.0, 2.0]], {"threshold": 1.0}))
    assert out.predictions == [{"score": 6.0, "above": True, "kwargs": []}]
    assert served.deployments.batchers.existing(predictor) is None


def test_concurrent_http_requests_each_get_their_own_predictions(tmp_path, make_app):
    model = modelkit.sklearn_model(tmp_path / "sk", "linreg", features=3)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": "sk"}}}})
    client = make_app(config)

    def one(seed):
        rows = np.random.default_rng(seed).normal(size=(1 + seed % 4, 3))
        response = client.post("/v1/projects/p/models/sk:predict", json={"instances": rows.tolist()})
        assert response.status_code == 200, response.text
        return rows, response.json["predictions"]

    with ThreadPoolExecutor(16) as pool:
        for rows, got in pool.map(one, range(400)):
            assert got == pytest.approx(model.predict(rows).tolist(), rel=1e-12)
