"""The queue behind adaptive batching (predictors/batching.py's module docstring describes the
policy): requests that arrive while a model call runs wait; when it ends, the waiting requests
that may share a call run as one, on one of their own threads, and each gets its own part back.

`Merger` is that queue for any kind of request a subclass can merge; what a kind merges and how
is the subclass's (`Batcher`: lists of instances; predictors/array_batching.py: numpy rows and
named tensors).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from time import perf_counter
from typing import Any, Protocol


class BatchObserver(Protocol):
    """What records batching's metrics (observability.metrics.VersionInstruments)."""

    def merged_call(self, sizes: list[int]) -> contextlib.AbstractContextManager[None]: ...

    def waited(self, seconds: float) -> None: ...

    def call_alone(self, seconds: float, instances: Any) -> None: ...

    def call_merged(self, seconds: float, instances: Any) -> None: ...


#: Default bound on the instances of one merged call (setting MLEMU_BATCH_MAX_INSTANCES).
DEFAULT_MAX_INSTANCES = 64

_PENDING: Any = object()
#: How long after the last sign of concurrent requests to one merger (a queue found at a
#: hand-off, or requests that joined a gathering call) a call that finds it idle gathers first.
#: A few calls' time: under a steady concurrent load the signs come every call or two; a version
#: that only some of a spread's requests reach sees them too seldom to gather, and gathering
#: there would only cost the yield.
GATHER_WINDOW_S = 0.002


class _Call:
    __slots__ = ("batch", "done", "error", "key", "payload", "result", "size")

    def __init__(self, payload: Any, key: Hashable, size: int) -> None:
        self.payload = payload
        self.key = key
        self.size = size
        # A plain lock as a one-shot signal: cheaper than an Event (a Condition plus a lock).
        self.done = threading.Lock()
        self.done.acquire()
        self.result: Any = _PENDING
        self.error: BaseException | None = None
        #: Set when this call's thread is chosen to run the next batch (which includes itself).
        self.batch: list[_Call] | None = None


class Merger:
    """The queue of the module docstring, for any kind of request a subclass can merge: it says
    which requests may share a call (`key`), how many rows each holds (`size`), how to join their
    payloads into one (`merge`) and how to cut the merged answer back into one per request
    (`split`). `Batcher` merges lists of instances; predictors/array_batching.py merges numpy
    rows and named tensors."""

    def __init__(self, predict: Callable[[Any], Any], max_instances: int = DEFAULT_MAX_INSTANCES,
                 observer: BatchObserver | None = None, times_calls: bool = False) -> None:
        """`times_calls`: `predict` is not timed by itself (no observability/instrument.py
        wrapper around it), so each model call is timed here, to `observer.call_alone` or
        `observer.call_merged`: the Merger knows which a call is, so the observer need not
        find out (a wrapper around custom code cannot know; it reads a thread-local flag)."""
        self._predict = predict
        self.max_instances = max_instances
        self.observer = observer
        timed = observer is not None and times_calls
        self._timed = observer.call_alone if timed else None  # type: ignore[union-attr]
        self._timed_merged = observer.call_merged if timed else None  # type: ignore[union-attr]
        self._lock = threading.Lock()
        self._busy = False
        #: The clock of the gathering decision (tests replace it).
        self.clock: Callable[[], float] = perf_counter
        #: When requests were last seen coming concurrently (`clock`'s time): the idle path
        #: gathers within GATHER_WINDOW_S of it (`_gathered`). Read and written without the
        #: lock: a stale value only costs or skips one yield.
        self._concurrent_at = float("-inf")
        self._queue: deque[_Call] = deque()
        #: Number of merged calls run (more than one request each), for tests.
        self.merged_calls = 0

    def key(self, payload: Any) -> Hashable | None:
        """What requests that may be merged with this one share; None: it runs alone."""
        raise NotImplementedError

    def size(self, payload: Any) -> int:
        """The rows (instances) of a request whose `key` is not None."""
        raise NotImplementedError

    def merge(self, payloads: list[Any]) -> Any:
        """One payload holding every request's rows, in order."""
        raise NotImplementedError

    def split(self, out: Any, sizes: list[int]) -> list[Any] | None:
        """The merged call's answer cut into one answer per request (of `sizes` rows), or None
        when it cannot be (then each request runs again alone)."""
        raise NotImplementedError

    def queued(self) -> int:
        """Requests waiting behind the call in flight (for tests and introspection)."""
        return len(self._queue)

    def predict(self, payload: Any) -> Any:
        key = self.key(payload)
        if key is None:
            return self._call(payload)
        with self._lock:
            if self._busy:
                call: _Call | None = _Call(payload, key, self.size(payload))
                self._queue.append(call)  # type: ignore[arg-type]
            else:
                self._busy = True
                call = None
        if call is None:  # idle: straight through, or first gathering what arrives meanwhile
            if self.clock() - self._concurrent_at < GATHER_WINDOW_S:
                return self._gathered(_Call(payload, key, self.size(payload)))
            try:
                return self._call(payload)
            finally:
                self._hand_off()
        if self.observer is None:
            call.done.acquire()
        else:
            queued = perf_counter()
            call.done.acquire()
            self.observer.waited(perf_counter() - queued)
        if call.batch is not None:
            try:
                self._run(call.batch)
            finally:
                self._hand_off()
        if call.error is not None:
            raise call.error
        return call.result

    def _call(self, payload: Any) -> Any:
        """One model call of one request alone (timed here when the predict function is not
        timed itself)."""
        timed = self._timed
        if timed is None:
            return self._predict(payload)
        started = perf_counter()
        try:
            return self._predict(payload)
        finally:
            timed(perf_counter() - started, payload)

    def _call_merged(self, payload: Any) -> Any:
        """The model call of merged requests (timed as `_call` times one request's)."""
        timed = self._timed_merged
        if timed is None:
            return self._predict(payload)
        started = perf_counter()
        try:
            return self._predict(payload)
        finally:
            timed(perf_counter() - started, payload)

    def _gathered(self, mine: _Call) -> Any:
        """The idle path while requests come concurrently: yield the GIL once, so the process's
        other threads carry their requests up to this queue, and run those that may share this
        call together with it. Without it, under a steady concurrent load most calls find the
        model idle and run alone, since the threads that would join are still reading their
        requests while the GIL is this one's (bench/notes/batch-gathering.md)."""
        try:  # inside: whatever ends the sleep, the hand-off below frees the model again
            time.sleep(0)  # releases the GIL; the threads waiting for it run until they block
            with self._lock:
                joined = self._take(mine)
            if joined:
                self._concurrent_at = self.clock()
            self._run([mine, *joined])
        finally:
            self._hand_off()
        if mine.error is not None:
            raise mine.error
        return mine.result

    def _take(self, head: _Call) -> list[_Call]:
        """Under the lock: the queued calls that may share `head`'s call, in order and up to
        max_instances rows in all, taken off the queue (the others keep their places)."""
        batch, count, rest = [], head.size, deque[_Call]()
        while self._queue:
            call = self._queue.popleft()
            if call.key == head.key and count + call.size <= self.max_instances:
                batch.append(call)
                count += call.size
            else:
                rest.append(call)
        self._queue = rest
        return batch

    def _hand_off(self) -> None:
        """After a call: pick the next batch from the queue and wake its first thread to run it."""
        with self._lock:
            if not self._queue:
                self._busy = False
                return
            self._concurrent_at = self.clock()  # requests are arriving concurrently
            head = self._queue.popleft()
            batch = [head, *self._take(head)]
        head.batch = batch
        head.done.release()

    def _run(self, batch: list[_Call]) -> None:
        try:
            if len(batch) > 1 and self._run_merged(batch):
                return
            for call in batch:
                try:
                    call.result = self._call(call.payload)
                except BaseException as exc:  # noqa: BLE001 - handed to that request's own thread
                    call.error = exc
        finally:
            for call in batch[1:]:  # batch[0] is this thread's own call
                if call.result is _PENDING and call.error is None:
                    call.error = RuntimeError("the batch this request was part of did not run")
                call.done.release()

    def _run_merged(self, batch: list[_Call]) -> bool:
        sizes = [call.size for call in batch]
        counting = (self.observer.merged_call(sizes) if self.observer is not None
                    else contextlib.nullcontext())
        try:
            merged = self.merge([call.payload for call in batch])
            with counting:
                out = self._call_merged(merged)
            parts = self.split(out, sizes)
        except Exception:  # noqa: BLE001 - some request is bad: run them one by one
            return False
        if parts is None:  # not one prediction per instance: cannot split it
            return False
        self.merged_calls += 1
        for call, part in zip(batch, parts, strict=True):
            call.result = part
        return True


def split_rows(out: Any, sizes: list[int]) -> list[Any] | None:
    """A merged call's predictions (a list, an array or an iterable) as one list per request,
    or None unless there is exactly one prediction per instance."""
    if hasattr(out, "tolist"):
        out = out.tolist()
    elif not isinstance(out, list):
        out = list(out)
    if len(out) != sum(sizes):
        return None
    parts, start = [], 0
    for size in sizes:
        parts.append(out[start:start + size])
        start += size
    return parts
