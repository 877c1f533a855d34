"""Adaptive batching: concurrent predict calls to one predictor run as one merged call.

A model call costs a fixed overhead plus a little per row, so under concurrent load merging
requests multiplies throughput. The policy:

- A call that finds the predictor idle runs at once, alone: there is no added wait when idle and
  no timer anywhere.
- Calls that arrive while a call is running queue up. When the running call finishes, the queued
  calls whose instances have the same layout (row type, length and element types) are merged, in
  arrival order and up to `max_instances` instances, into one list; one of their own threads runs
  the merged call and every caller gets back its own slice of the predictions, in order. So a
  queued call waits at most for the call in flight, and batches grow only as far as the load does.
- If the merged call fails, or does not return one prediction per instance, every request of the
  batch runs again alone, so a bad request gets its own error and the others their predictions.
- Requests with their own parameters, with rows of differing layouts, with `max_instances`
  instances or more, or whose instances are a numpy array (large all-number bodies, wirearray.py)
  are never merged (they run as they come).
- Merging costs a thread handoff per request, which pays even for cheap models: a single-row
  scikit-learn or XGBoost call spends most of its time in per-call overhead (scikit-learn's
  input validation above all), which a merged call pays once for all its rows. An idle batcher
  adds only two lock operations. What this gains, model by model and by concurrency, is
  measured in bench/RESULTS.md ("Batching and the thread policy").

Only predictors whose predictions are row-independent may be batched (`Predictor.batchable`:
the built-in frameworks; custom predictors opt in with a `batchable = True` class attribute).
For costly models one call at a time runs per predictor and process (parallelism comes from the
worker processes); the requests waiting behind it form the next batch. Each loaded predictor's
Batcher is kept in a `Batchers` owned by the emulator's Deployments, and dropped with the
predictor (it holds the predictor only weakly, so an unloaded predictor is freed).
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

PredictFn = Callable[[list[Any]], Any]


class BatchObserver(Protocol):
    """What records batching's metrics (observability.metrics.VersionInstruments)."""

    def merged_call(self, sizes: list[int]) -> contextlib.AbstractContextManager[None]: ...

    def waited(self, seconds: float) -> None: ...

    def model_call(self, seconds: float, instances: Any) -> None: ...

#: Default bound on the instances of one merged call (setting MLEMU_BATCH_MAX_INSTANCES).
DEFAULT_MAX_INSTANCES = 64

_SCALARS = (int, float, str, bool)
_PENDING: Any = object()


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


class _Call:
    __slots__ = ("batch", "done", "error", "instances", "key", "result")

    def __init__(self, instances: list[Any], key: tuple[Any, ...]) -> None:
        self.instances = instances
        self.key = key
        # A plain lock as a one-shot signal: cheaper than an Event (a Condition plus a lock).
        self.done = threading.Lock()
        self.done.acquire()
        self.result: Any = _PENDING
        self.error: BaseException | None = None
        #: Set when this call's thread is chosen to run the next batch (which includes itself).
        self.batch: list[_Call] | None = None


class Batcher:
    """Merges concurrent `predict(instances)` calls to one predict function (see module doc)."""

    def __init__(self, predict: PredictFn, max_instances: int = DEFAULT_MAX_INSTANCES,
                 observer: BatchObserver | None = None, times_calls: bool = False) -> None:
        """`times_calls`: `predict` is not timed by itself (no observability/instrument.py
        wrapper around it), so each model call is timed here, to `observer.model_call`."""
        self._predict = predict
        self.max_instances = max_instances
        self.observer = observer
        self._timed = observer.model_call if observer is not None and times_calls else None
        self._lock = threading.Lock()
        self._busy = False
        self._queue: deque[_Call] = deque()
        #: Number of merged calls run (more than one request each), for tests.
        self.merged_calls = 0

    def predict(self, instances: list[Any]) -> Any:
        key = layout(instances) if 0 < len(instances) < self.max_instances else None
        if key is None:
            return self._call(instances)
        with self._lock:
            if self._busy:
                call: _Call | None = _Call(instances, key)
                self._queue.append(call)  # type: ignore[arg-type]
            else:
                self._busy = True
                call = None
        if call is None:  # idle: straight through
            try:
                return self._call(instances)
            finally:
                self._hand_off()
        if self.observer is None:
            call.done.acquire()
        else:
            queued = time.perf_counter()
            call.done.acquire()
            self.observer.waited(time.perf_counter() - queued)
        if call.batch is not None:
            try:
                self._run(call.batch)
            finally:
                self._hand_off()
        if call.error is not None:
            raise call.error
        return call.result

    def _call(self, instances: list[Any]) -> Any:
        """One model call (timed here when the predict function is not timed itself)."""
        timed = self._timed
        if timed is None:
            return self._predict(instances)
        started = time.perf_counter()
        try:
            return self._predict(instances)
        finally:
            timed(time.perf_counter() - started, instances)

    def _hand_off(self) -> None:
        """After a call: pick the next batch from the queue and wake its first thread to run it."""
        with self._lock:
            if not self._queue:
                self._busy = False
                return
            head = self._queue.popleft()
            batch, count, rest = [head], len(head.instances), deque[_Call]()
            while self._queue:
                call = self._queue.popleft()
                if call.key == head.key and count + len(call.instances) <= self.max_instances:
                    batch.append(call)
                    count += len(call.instances)
                else:
                    rest.append(call)  # keeps its place for the next round
            self._queue = rest
        head.batch = batch
        head.done.release()

    def _run(self, batch: list[_Call]) -> None:
        try:
            if len(batch) > 1 and self._run_merged(batch):
                return
            for call in batch:
                try:
                    call.result = self._call(call.instances)
                except BaseException as exc:  # noqa: BLE001 - handed to that request's own thread
                    call.error = exc
        finally:
            for call in batch[1:]:  # batch[0] is this thread's own call
                if call.result is _PENDING and call.error is None:
                    call.error = RuntimeError("the batch this request was part of did not run")
                call.done.release()

    def _run_merged(self, batch: list[_Call]) -> bool:
        merged = [row for call in batch for row in call.instances]
        counting = (self.observer.merged_call([len(call.instances) for call in batch])
                    if self.observer is not None else contextlib.nullcontext())
        try:
            with counting:
                out = self._call(merged)
        except Exception:  # noqa: BLE001 - some request is bad: run them one by one
            return False
        if hasattr(out, "tolist"):
            out = out.tolist()
        elif not isinstance(out, list):
            out = list(out)
        if len(out) != len(merged):  # not one prediction per instance: cannot split it
            return False
        self.merged_calls += 1
        start = 0
        for call in batch:
            end = start + len(call.instances)
            call.result = out[start:end]
            start = end
        return True


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


class Batchers:
    """The one Batcher of each loaded predictor, kept by the emulator's Deployments (so two
    emulators in one process never share one) and dropped with its predictor."""

    def __init__(self) -> None:
        self._batchers: weakref.WeakKeyDictionary[Any, Batcher] = weakref.WeakKeyDictionary()
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

    def existing(self, predictor: Any) -> Batcher | None:
        """The predictor's Batcher if one was made (for tests and introspection)."""
        return self._batchers.get(predictor)
