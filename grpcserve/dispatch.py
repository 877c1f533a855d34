"""Where each gRPC call's synchronous handler runs: on the server's event loop, or in its pool.

grpc.aio runs a synchronous handler in its thread pool (`_finish_handler_with_unary_response` in
grpc/_cython/_cygrpc/aio/server.pyx.pxi: `loop.run_in_executor`), so every call crosses from the
event loop to a pool thread and back: two thread wake-ups, two GIL handoffs and a write to the
loop's self-pipe. For a one-row scikit-learn call that crossing is a large share of the CPU a V2
`ModelInfer` costs (bench/NOTES.md, sixth session), and it lengthened the tail. KServe's
gRPC server runs its predict on the event loop itself.

The policy, per unary RPC method and model (the request's `model_name`/`model_version` or
`model` field):

- A call runs on the loop when its request message is at most `max_bytes` and that method's
  recent calls to that model were brief: an exponentially weighted mean of their cost at most
  `max_seconds`. A call run on the loop costs its wall time (what it held the loop for); a call
  run in the pool costs the pool thread's CPU time, since its wall time includes waiting for the
  GIL, which would keep a cheap model in the pool under load. While a call runs on the loop the
  process receives nothing else; a GIL-bound handler in a pool thread would hold the loop off
  the GIL for as long.
- A call on the loop that took more than DEMOTE_FACTOR times `max_seconds` and waited meanwhile
  (its thread gave up the CPU of its own accord: a model that sleeps or waits on I/O, which
  costs little CPU in the pool but holds the loop while it waits; a model reloaded from disk
  after the loaded-versions bound unloaded it) sends its method and model to the pool for
  DEMOTE_S seconds, whatever their mean: at most one such call per DEMOTE_S holds the loop. A
  call made long by the collector or by the process being preempted does not wait (the
  thread's voluntary context switches, getrusage(RUSAGE_THREAD), tell the two apart); it only
  raises the mean. With the wall time alone deciding, preemption on a busy machine sent brief
  models to the pool for whole demotion periods (bench/NOTES.md, sixth session); with the
  switches counted, preempted calls demote nothing.
- Everything else runs in the pool as grpc.aio would run it: the first call of a method and
  model (its cost is unknown), large requests, models whose calls are slow (so a long model call
  never holds the loop, and concurrent calls to it can be merged by adaptive batching), and
  streaming responses (passed through unchanged).

`max_seconds` 0 sends every call to the pool (MLEMU_GRPC_INLINE_MS=0).

A handler aborts through its context as with grpc's synchronous server: `abort` raises (here
`Aborted`, a BaseException, so handlers' `except Exception` blocks let it through) and the call
ends with that status, whichever side ran it.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import grpc

Behavior = Callable[[Any, Any], Any]

#: Default bound on the recent mean cost of a call run on the event loop (MLEMU_GRPC_INLINE_MS).
DEFAULT_MAX_SECONDS = 0.001
#: Requests larger than this always run in the pool (their decoding alone takes a while).
DEFAULT_MAX_BYTES = 64 << 10
#: Weight of the newest call in a method and model's mean cost.
WEIGHT = 0.25
#: A call on the loop longer than this many times the bound sends its method and model to the
#: pool for DEMOTE_S seconds.
DEMOTE_FACTOR = 4.0
DEMOTE_S = 30.0
#: Method and model keys remembered at most (model names come from requests: bounded).
MAX_KEYS = 4096
#: Request fields that name the model, in V2's and grps' messages.
_MODEL_FIELDS = ("model_name", "model_version", "model")


class Aborted(BaseException):
    """Raised by `HandlerContext.abort`; the dispatcher ends the call with this status. A
    BaseException, as the control flow it is: a handler's `except Exception` lets it through."""

    def __init__(self, code: grpc.StatusCode, details: str,
                 trailing_metadata: Sequence[tuple[str, str | bytes]]) -> None:
        super().__init__(code, details)
        self.code, self.details, self.trailing_metadata = code, details, tuple(trailing_metadata)
        #: CPU seconds the handler had spent when it aborted in a pool thread.
        self.cost = 0.0


class HandlerContext:
    """The servicer context a synchronous handler sees, on the loop or in a pool thread: grpc.aio's
    context with a synchronous `abort`. `set_code`, `set_details`, `invocation_metadata` and the
    other non-coroutine methods are grpc.aio's own (they only read or set the call's state)."""

    __slots__ = ("_context",)

    def __init__(self, context: Any) -> None:
        self._context = context

    def abort(self, code: grpc.StatusCode, details: str = "",
              trailing_metadata: Sequence[tuple[str, str | bytes]] = ()) -> None:
        raise Aborted(code, details, trailing_metadata)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


#: getrusage's per-thread figures (Linux); elsewhere every long call counts as waiting.
_THREAD = getattr(resource, "RUSAGE_THREAD", None)


def waits() -> int:
    """Voluntary context switches of the calling thread so far (-1 where unknown)."""
    return resource.getrusage(_THREAD).ru_nvcsw if _THREAD is not None else -1


@dataclass(frozen=True)
class Meter:
    """The readings the policy decides from, each of the calling thread or process: wall time
    (what a call on the loop held it for), the thread's CPU time (what a call in the pool cost),
    its voluntary context switches (whether a call waited) and the clock that ends a demotion.
    Tests pass readings of their own, so what they assert never depends on the machine's speed."""

    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.thread_time
    waits: Callable[[], int] = waits
    now: Callable[[], float] = time.monotonic


class CallCosts:
    """Per (method, model): an exponentially weighted mean of recent calls' cost in seconds, and
    until when (`now`, time.monotonic by default) its calls are kept off the loop."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._entries: dict[tuple[str, ...], list[float]] = {}
        self.now = now

    def mean(self, key: tuple[str, ...]) -> float | None:
        """The mean cost, or None when unknown or while the key is kept off the loop."""
        entry = self._entries.get(key)
        if entry is None or (entry[1] and entry[1] > self.now()):
            return None
        return entry[0]

    def note(self, key: tuple[str, ...], seconds: float) -> None:
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= MAX_KEYS:
                self._entries.clear()
            self._entries[key] = [seconds, 0.0]
        else:
            entry[0] += WEIGHT * (seconds - entry[0])

    def demote(self, key: tuple[str, ...], seconds: float) -> None:
        """Keep `key`'s calls off the loop for `seconds`."""
        entry = self._entries.setdefault(key, [0.0, 0.0])
        entry[1] = self.now() + seconds


def model_key(method: str, request: Any) -> tuple[str, ...]:
    return (method, *(str(getattr(request, name, "")) for name in _MODEL_FIELDS))


def _in_pool(behavior: Behavior, request: Any, context: HandlerContext,
             cpu: Callable[[], float]) -> tuple[Any, float]:
    """Run `behavior` in a pool thread: its answer and the CPU time the thread spent on it."""
    started = cpu()
    try:
        return behavior(request, context), cpu() - started
    except Aborted as exc:  # carried to the loop with the cost (abort is a normal outcome)
        exc.cost = cpu() - started
        raise


class Dispatcher:
    """Builds each unary method's handler: run on the loop or in `pool` (see module doc).
    Every call of one server goes through one Dispatcher, on that server's event loop."""

    def __init__(self, pool: Executor, max_seconds: float = DEFAULT_MAX_SECONDS,
                 max_bytes: int = DEFAULT_MAX_BYTES, meter: Meter | None = None) -> None:
        self.pool = pool
        self.max_seconds = max_seconds
        self.max_bytes = max_bytes
        self.meter = meter or Meter()
        self.costs = CallCosts(self.meter.now)
        #: Calls run on the loop and in the pool, for tests and introspection.
        self.inline_calls = 0
        self.pool_calls = 0

    def brief(self, key: tuple[str, ...], request: Any) -> bool:
        """Whether a call may run on the loop (see module doc)."""
        if self.max_seconds <= 0:
            return False
        mean = self.costs.mean(key)
        return mean is not None and mean <= self.max_seconds \
            and request.ByteSize() <= self.max_bytes

    def demotes(self, took: float, waits_before: int, waits_after: int) -> bool:
        """Whether a call that ran on the loop for `took` seconds sends its method and model to
        the pool for DEMOTE_S: it was long, and its thread waited meanwhile (see module doc)."""
        waited = waits_before < 0 or waits_after > waits_before
        return took > DEMOTE_FACTOR * self.max_seconds and waited

    def unary(self, method: str, behavior: Behavior) -> Callable[[Any, Any], Any]:
        """An async unary-unary handler running the synchronous `behavior` where it belongs."""
        costs, pool, meter = self.costs, self.pool, self.meter

        async def handle(request: Any, context: Any) -> Any:
            key = model_key(method, request)
            handler_context = HandlerContext(context)
            if self.brief(key, request):
                self.inline_calls += 1
                waited, started = meter.waits(), meter.wall()
                try:
                    return behavior(request, handler_context)
                except Aborted as exc:
                    aborted = exc
                finally:
                    took = meter.wall() - started
                    costs.note(key, took)
                    if self.demotes(took, waited, meter.waits()):
                        costs.demote(key, DEMOTE_S)
            else:
                self.pool_calls += 1
                loop = asyncio.get_running_loop()
                try:
                    answer, cost = await loop.run_in_executor(pool, _in_pool, behavior, request,
                                                              handler_context, meter.cpu)
                    costs.note(key, cost)
                    return answer
                except Aborted as exc:
                    costs.note(key, exc.cost)
                    aborted = exc
            await context.abort(aborted.code, aborted.details, aborted.trailing_metadata)

        return handle
