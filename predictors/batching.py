"""Adaptive batching: concurrent predict calls to one predictor run as one merged call.

A model call costs a fixed overhead plus a little per row, so under concurrent load merging
requests multiplies throughput. The policy:

- A call that finds the predictor idle runs at once. While calls come concurrently (a queue
  was found at the end of a call, or requests joined one, within the last GATHER_WINDOW_S), it
  first yields the GIL once (a zero-second sleep), and the queued calls that may share its call
  join it (predictors/merging.py `Merger._gathered`); otherwise it runs alone, without yielding,
  so a lone client, or a version only a few of a spread's requests reach, pays nothing for it.
- Calls that arrive while a call is running queue up. When the running call finishes, the queued
  calls whose instances have the same layout (row type, length and element types) are merged, in
  arrival order and up to `max_instances` instances, into one list; one of their own threads runs
  the merged call and every caller gets back its own slice of the predictions, in order. So a
  queued call waits at most for the call in flight, and batches grow only as far as the load does.
- If the merged call fails, or does not return one prediction per instance, every request of the
  batch runs again alone, so a bad request gets its own error and the others their predictions.
- Requests with their own parameters, with rows of differing layouts, or with `max_instances`
  instances or more are never merged (they run as they come). Requests whose instances are a
  numpy array (V2 and grps tensors, large all-number bodies: wirearray.py) or named tensors
  (TensorFlow signatures) merge by predictors/array_batching.py's rule instead.
- Merging costs a thread handoff per request, which pays even for cheap models: a single-row
  scikit-learn or XGBoost call spends most of its time in per-call overhead (scikit-learn's
  input validation above all), which a merged call pays once for all its rows. An idle batcher
  adds only two lock operations and a clock read. What this gains, model by model and by concurrency, is
  measured in bench/RESULTS.md ("Batching and the thread policy").

Only predictors whose predictions are row-independent may be batched (`Predictor.batchable`:
the built-in frameworks; custom predictors opt in with a `batchable = True` class attribute).
For costly models one call at a time runs per predictor and process (parallelism comes from the
worker processes); the requests waiting behind it form the next batch. Each loaded predictor's
batchers are kept in a `Batchers` owned by the emulator's Deployments, and dropped with the
predictor (it holds the predictor only weakly, so an unloaded predictor is freed).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from predictors.array_batching import ArrayBatcher, TensorBatcher, TensorCall
from predictors.merging import DEFAULT_MAX_INSTANCES, BatchObserver, Merger, split_rows

__all__ = ["DEFAULT_MAX_INSTANCES", "KINDS", "ArrayBatcher", "BatchObserver", "Batcher",
           "Batchers", "Merger", "TensorBatcher", "TensorCall", "layout"]

PredictFn = Callable[[list[Any]], Any]

_SCALARS = (int, float, str, bool)


def _row_key(row: Any) -> tuple[Any, ...] | None:
    kind = type(row)
    if kind is list:
        return (list, len(row), *map(type, row))
    if kind is dict:
        return (dict, *row, *map(type, row.values()))
    if kind in _SCALARS:
        return (kind,)
    return None


def layout(instances: list[Any]) -> tuple[Any, ...] | None:
    """A key shared by requests that can be merged, or None if this one must run alone.

    Rows with the same length and element types give np.asarray (and TensorFlow) the same shape
    and dtype merged as alone, so merging does not change what the model sees.
    """
    key = _row_key(instances[0])
    if key is None:
        return None
    for row in instances[1:]:
        if _row_key(row) != key:
            return None
    return key


class Batcher(Merger):
    """Merges concurrent `predict(instances)` calls (lists of rows) to one predict function."""

    def key(self, payload: Any) -> Hashable | None:
        return layout(payload) if 0 < len(payload) < self.max_instances else None

    def size(self, payload: Any) -> int:
        return len(payload)

    def merge(self, payloads: list[Any]) -> Any:
        return [row for rows in payloads for row in rows]

    def split(self, out: Any, sizes: list[int]) -> list[Any] | None:
        return split_rows(out, sizes)


def _weak_predict(predictor: Any, direct: bool = False) -> PredictFn:
    """`predictor.predict` without a strong reference to the predictor: the Batcher is the value
    of a weak-keyed dict, and a value that held its own key would keep every unloaded predictor
    (and its model) alive for good. Whoever calls the Batcher holds the predictor meanwhile.
    `direct`: the class's own predict, past the timing wrapper observability/instrument.py sets
    on the instance (the Batcher times the calls itself)."""
    ref = weakref.ref(predictor)
    method = type(predictor).predict if direct else None

    def predict(instances: list[Any]) -> Any:
        target = ref()
        if target is None:  # cannot happen while a caller holds it; said plainly if it does
            raise RuntimeError("the predictor of this batcher was unloaded")
        return target.predict(instances) if method is None else method(target, instances)

    return predict


def _weak_predict_tensors(predictor: Any) -> Callable[[TensorCall], Any]:
    """`predictor.predict_tensors` for a TensorBatcher, weakly (see `_weak_predict`), through
    the instance's timed method: it counts a dict of columns' rows itself."""
    ref = weakref.ref(predictor)

    def predict_tensors(call: TensorCall) -> Any:
        target = ref()
        if target is None:
            raise RuntimeError("the predictor of this batcher was unloaded")
        names = list(call.output_names) if call.output_names is not None else None
        return target.predict_tensors(call.inputs, signature_name=call.signature_name,
                                      output_names=names)

    return predict_tensors


#: The kinds of batcher a predictor may have, by the shape of the requests they merge.
KINDS = ("instances", "arrays", "tensors")


class Batchers:
    """The batchers of each loaded predictor (one per kind of request: lists of instances, numpy
    rows, named tensors), kept by the emulator's Deployments (so two emulators in one process
    never share one) and dropped with its predictor."""

    def __init__(self) -> None:
        self._batchers: weakref.WeakKeyDictionary[Any, Batcher] = weakref.WeakKeyDictionary()
        self._others: dict[str, weakref.WeakKeyDictionary[Any, Merger]] = {
            "arrays": weakref.WeakKeyDictionary(), "tensors": weakref.WeakKeyDictionary()}
        self._guard = threading.Lock()

    def get(self, predictor: Any, max_instances: int = DEFAULT_MAX_INSTANCES,
            observer: Callable[[], BatchObserver | None] | None = None) -> Batcher:
        """The predictor's Batcher; `observer` makes the metrics recorder of a new one."""
        batcher = self._batchers.get(predictor)
        if batcher is None or batcher.max_instances != max_instances:
            with self._guard:
                batcher = self._batchers.get(predictor)
                if batcher is None or batcher.max_instances != max_instances:
                    recorder = observer() if observer else None
                    # A built-in framework's calls are timed by the Batcher, one wrapper fewer
                    # per call; custom code keeps its wrapper, which also attributes its output.
                    direct = recorder is not None and bool(getattr(predictor, "framework", ""))
                    batcher = self._batchers[predictor] = Batcher(
                        _weak_predict(predictor, direct), max_instances, recorder, direct)
        return batcher

    def arrays(self, predictor: Any, max_instances: int = DEFAULT_MAX_INSTANCES,
               observer: Callable[[], BatchObserver | None] | None = None) -> Merger:
        """The predictor's ArrayBatcher (numpy rows to `predict`), made as `get` makes one."""
        def make(recorder: BatchObserver | None) -> Merger:
            direct = recorder is not None and bool(getattr(predictor, "framework", ""))
            return ArrayBatcher(_weak_predict(predictor, direct), max_instances, recorder, direct)

        return self._other("arrays", predictor, max_instances, observer, make)

    def tensors(self, predictor: Any, max_instances: int = DEFAULT_MAX_INSTANCES,
                observer: Callable[[], BatchObserver | None] | None = None) -> Merger:
        """The predictor's TensorBatcher (TensorCalls to `predict_tensors`)."""
        def make(recorder: BatchObserver | None) -> Merger:
            return TensorBatcher(_weak_predict_tensors(predictor), max_instances, recorder)

        return self._other("tensors", predictor, max_instances, observer, make)

    def _other(self, kind: str, predictor: Any, max_instances: int,
               observer: Callable[[], BatchObserver | None] | None,
               make: Callable[[BatchObserver | None], Merger]) -> Merger:
        table = self._others[kind]
        batcher = table.get(predictor)
        if batcher is None or batcher.max_instances != max_instances:
            with self._guard:
                batcher = table.get(predictor)
                if batcher is None or batcher.max_instances != max_instances:
                    batcher = table[predictor] = make(observer() if observer else None)
        return batcher

    def existing(self, predictor: Any, kind: str = "instances") -> Merger | None:
        """The predictor's batcher of that kind if one was made (for tests and introspection)."""
        if kind == "instances":
            return self._batchers.get(predictor)
        return self._others[kind].get(predictor)
