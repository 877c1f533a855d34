"""Adaptive batching of numpy rows and named tensors (predictors/array_batching.py): what merges
(same names, dtypes and shapes past the batch dimension, same signature and outputs), what runs
alone, how answers are cut back, and the fall-backs (an unsplittable output, a failed merged
call). Merged answers are compared with the same requests run alone, value for value.

Batches are formed deterministically: the first call holds the predictor busy at a gate while
the test queues the others behind it. No timing is asserted.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

import predictors
from core.errors import PredictionFailed
from predictors.array_batching import ArrayBatcher, TensorBatcher, TensorCall
from predictors.merging import Merger
from tests.kit import modelkit


class Held:
    """A predict function whose first call waits at a gate; records every payload it gets."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[Any] = []
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, payload: Any) -> Any:
        self.calls.append(payload)
        if len(self.calls) == 1:
            self.entered.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return self.inner(payload)


def queue_behind(batcher: Merger, held: Held, payloads: list[Any]) -> list[Any]:
    """Run payloads[0] (held), queue the rest behind it, open the gate; each one's answer."""
    results: dict[int, Any] = {}

    def run(i: int, payload: Any) -> None:
        try:
            results[i] = batcher.predict(payload)
        except Exception as exc:  # the request's own error is its answer here
            results[i] = exc

    threads = [threading.Thread(target=run, args=(0, payloads[0]))]
    threads[0].start()
    assert held.entered.wait(60)
    threads += [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(payloads) if i]
    for thread in threads[1:]:
        thread.start()
    deadline = time.monotonic() + 60
    while batcher.queued() < len(payloads) - 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert batcher.queued() == len(payloads) - 1
    held.gate.set()
    for thread in threads:
        thread.join(60)
    return [results[i] for i in range(len(payloads))]


@pytest.fixture(scope="module")
def forest(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A scikit-learn predictor whose rows do not interact (trees): merged equals alone exactly."""
    root = tmp_path_factory.mktemp("forest")
    modelkit.sklearn_model(root, "forest", features=4)
    return predictors.load(str(root))[0]


def test_numpy_rows_merge_and_answer_as_alone(forest: Any) -> None:
    held = Held(forest.predict)
    batcher = ArrayBatcher(held)
    rng = np.random.default_rng(3)
    payloads = [rng.normal(size=(n, 4)) for n in (1, 1, 2, 1, 3)]
    got = queue_behind(batcher, held, payloads)
    assert [len(call) for call in held.calls] == [1, 7]  # the held call, then one merged call
    assert batcher.merged_calls == 1
    for payload, answer in zip(payloads, got, strict=True):
        assert np.asarray(answer).tolist() == np.asarray(forest.predict(payload)).tolist()


def test_arrays_that_cannot_be_concatenated_are_grouped_apart() -> None:
    held = Held(lambda array: array.sum(axis=tuple(range(1, array.ndim))))
    batcher = ArrayBatcher(held)
    payloads = [np.ones((1, 4)), np.ones((1, 4)), np.ones((1, 4), np.float32),
                np.ones((1, 3)), np.ones((2, 4))]
    got = queue_behind(batcher, held, payloads)
    assert [np.asarray(a).tolist() for a in got] == [[4.0], [4.0], [4.0], [3.0], [4.0, 4.0]]
    # the float64 (n, 4) requests merged; float32 and 3 wide ran in calls of their own
    shapes = sorted((c.dtype.str, c.shape) for c in held.calls[1:])
    assert shapes == sorted([("<f8", (3, 4)), ("<f4", (1, 4)), ("<f8", (1, 3))])
    assert batcher.key(np.array(["a"], dtype=object)) is None  # not numbers: never merged


def test_bounded_and_scalar_requests_run_alone() -> None:
    held = Held(lambda array: np.atleast_1d(array).tolist())
    held.gate.set()
    batcher = ArrayBatcher(held, max_instances=4)
    assert batcher.key(np.ones((4, 2))) is None and batcher.key(np.float64(1.0)) is None
    assert batcher.key(np.ones((3, 2))) == batcher.key(np.zeros((1, 2)))
    assert batcher.predict(np.ones((4, 1))) == [[1.0]] * 4 and not batcher._busy


def _sums(call: TensorCall) -> dict[str, np.ndarray]:
    a, b = call.inputs["a"], call.inputs["b"]
    out = {"total": a.sum(axis=1) + b, "scaled": a * b[:, None]}
    return {name: out[name] for name in call.output_names or out}


def tensor_call(rows: int, seed: int, signature: str | None = None,
                outputs: tuple[str, ...] | None = None) -> TensorCall:
    rng = np.random.default_rng(seed)
    return TensorCall({"a": rng.normal(size=(rows, 2)).astype(np.float32),
                       "b": rng.normal(size=rows).astype(np.float32)}, signature, outputs)


def test_named_tensors_merge_on_the_batch_dimension_and_split_back() -> None:
    held = Held(_sums)
    batcher = TensorBatcher(held)
    payloads = [tensor_call(1, 0), tensor_call(1, 1), tensor_call(2, 2), tensor_call(1, 3)]
    got = queue_behind(batcher, held, payloads)
    assert batcher.merged_calls == 1 and held.calls[1].inputs["a"].shape == (4, 2)
    for payload, answer in zip(payloads, got, strict=True):
        alone = _sums(payload)
        assert set(answer) == set(alone)
        for name in alone:
            assert answer[name].dtype == alone[name].dtype
            np.testing.assert_array_equal(answer[name], alone[name])


def test_tensors_merge_only_with_the_same_names_types_shapes_and_call() -> None:
    held = Held(_sums)
    batcher = TensorBatcher(held)
    base = tensor_call(1, 0)
    renamed = TensorCall({"a": base.inputs["a"], "c": base.inputs["b"]})
    wider = TensorCall({"a": np.ones((1, 3), np.float32), "b": np.ones(1, np.float32)})
    doubles = TensorCall({k: v.astype(np.float64) for k, v in base.inputs.items()})
    uneven = TensorCall({"a": np.ones((2, 2), np.float32), "b": np.ones(1, np.float32)})
    assert batcher.key(uneven) is None  # inputs disagree on the batch size: runs alone
    keys = {batcher.key(c) for c in (base, renamed, wider, doubles, tensor_call(1, 0, "half"),
                                     tensor_call(1, 0, None, ("total",)))}
    assert len(keys) == 6
    assert batcher.key(tensor_call(3, 9)) == batcher.key(base)


def test_an_output_without_a_row_per_instance_runs_each_request_alone() -> None:
    def with_statistic(call: TensorCall) -> dict[str, np.ndarray]:
        return {**_sums(call), "mean": np.asarray(call.inputs["b"].mean())}

    held = Held(with_statistic)
    batcher = TensorBatcher(held)
    payloads = [tensor_call(1, s) for s in range(4)]
    got = queue_behind(batcher, held, payloads)
    assert batcher.merged_calls == 0
    assert [c.inputs["b"].shape[0] for c in held.calls] == [1, 3, 1, 1, 1]  # merged, then alone
    for payload, answer in zip(payloads, got, strict=True):
        np.testing.assert_array_equal(answer["mean"], with_statistic(payload)["mean"])


def test_a_failed_merged_call_gives_each_request_its_own_answer(forest: Any) -> None:
    def refuse_nan(array: np.ndarray) -> Any:
        if np.isnan(array).any():
            raise PredictionFailed("Input contains NaN.")
        return forest.predict(array)

    held = Held(refuse_nan)
    batcher = ArrayBatcher(held)
    good = [np.full((1, 4), 0.5), np.full((1, 4), -1.0)]
    bad = np.array([[np.nan, 1.0, 2.0, 3.0]])
    got = queue_behind(batcher, held, [good[0], bad, good[1]])
    assert isinstance(got[1], PredictionFailed)
    assert np.asarray(got[0]).tolist() == np.asarray(forest.predict(good[0])).tolist()
    assert np.asarray(got[2]).tolist() == np.asarray(forest.predict(good[1])).tolist()
    assert batcher.merged_calls == 0
