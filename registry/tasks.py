"""Durable, claimable background work behind long-running operations.

Every unfinished Operation has a task document (store kind "tasks", parent "tasks", named like
the operation) written in the same transaction as the Operation and the resource it changes, so
a crash never leaves one without the other. A task records which process owns it (`owner`) and
until when (`lease_until`, wall-clock seconds). Owners renew their leases while they work; any
process sharing the store may claim a task whose lease ran out, or whose owner it can prove dead
(same machine and pid namespace, and that pid no longer runs the process that claimed it), and
run it again. Claiming re-reads the task inside a write transaction, so exactly one claimant
wins, whichever backend (SQLite, a shared SQL server) holds the store.

A task runs in two steps, registered per operation type with the runner (`TaskRunner.register`,
called by the control plane's `operation_work.register` where the emulator is built):
  work(context, task) -> result      slow, outside any transaction, must be safe to repeat
  finish(context, task, result, err) inside the transaction that deletes the task
  revert(context, task)              optional: how a cancelled operation undoes its change
`finish` runs only if this process still owns the task (not cancelled, not taken over), so an
operation's outcome is written once. A task interrupted `MAX_ATTEMPTS` times is finished with
an error instead of being run again.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from core.errors import Aborted, ApiError, Internal
from registry.owners import owner_is_dead, this_owner
from registry.resources import from_stored
from registry.store_base import Store

log = logging.getLogger("mlemu.tasks")

KIND = "tasks"
PARENT = "tasks"
LEASE_S = 30.0
TICK_S = 2.0
MAX_ATTEMPTS = 3

Work = Callable[[Any, "Task"], Any]
Finish = Callable[[Any, "Task", Any, "ApiError | None"], None]
Revert = Callable[[Any, "Task"], None]


@dataclasses.dataclass
class Task:
    name: str  # the operation's name
    type: str  # its OperationMetadata.operationType
    target: str  # the model or version it changes
    args: dict[str, Any]
    owner: str
    lease_until: float
    attempts: int = 1

    def storage(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Handler:
    work: Work
    finish: Finish
    revert: Revert | None = None
    #: Runs for long (a batch prediction job): on threads of its own, so it never holds up the
    #: short operations.
    long: bool = False


# --- the store side ---------------------------------------------------------------------------

def get(store: Store, name: str) -> Task | None:
    data = store.get(KIND, name)
    return from_stored(Task, data) if data is not None else None


def put(store: Store, task: Task) -> None:
    store.put(KIND, task.name, PARENT, task.storage())


def delete(store: Store, name: str) -> None:
    store.delete(KIND, name)


def pending(store: Store) -> list[Task]:
    """Every unfinished task (few: only operations in progress have one)."""
    return [from_stored(Task, d) for d in store.children(KIND, PARENT)]


def touching(store: Store, names: set[str], prefix: str | None = None) -> list[Task]:
    """Unfinished tasks whose target is one of `names` or starts with `prefix`."""
    return [t for t in pending(store)
            if t.target in names or (prefix is not None and t.target.startswith(prefix))]


# --- the runner -------------------------------------------------------------------------------

class TaskRunner:
    """Runs this process's tasks on daemon threads; renews their leases; adopts orphans."""

    def __init__(self, store: Store, context: Any, *, threads: int = 2, lease_s: float = LEASE_S,
                 tick_s: float = TICK_S, on_tick: Callable[[], None] | None = None,
                 long_threads: int = 4) -> None:
        self.store = store
        self._long_threads = long_threads
        self._long_queue: queue.Queue[str] = queue.Queue()
        #: Other periodic upkeep of this process (the emulator prunes its deployments cache).
        self.on_tick = on_tick
        self.context = context
        self.owner = this_owner()
        self.lease_s = lease_s
        self.tick_s = tick_s
        self._queue: queue.Queue[str] = queue.Queue()
        self._mine: set[str] = set()
        self._guard = threading.Lock()
        self._threads = threads
        self._started = False
        self._idle = threading.Condition(self._guard)
        #: Operation type -> what its task does; a task of a type not registered here stays
        #: in the store untouched (another process, or a later version, may know it).
        self._handlers: dict[str, Handler] = {}
        #: Task name -> when this process first held it back (its timing rule's clock).
        self._holding: dict[str, float] = {}
        #: Asked before a task's work (timing rules, controls/timing.py): (task type, task name,
        #: seconds since this run began) -> seconds to wait before asking again, an error that
        #: ends the task without its work, or None to run it now.
        self.hold: Callable[[str, str, float], float | ApiError | None] | None = None

    def register(self, task_type: str, work: Work, finish: Finish,
                 revert: Revert | None = None, long: bool = False) -> None:
        self._handlers[task_type] = Handler(work, finish, revert, long)

    def handler(self, task_type: str) -> Handler | None:
        return self._handlers.get(task_type)

    def new_task(self, name: str, task_type: str, target: str, args: dict[str, Any]) -> Task:
        """A task owned by this process; put it in the store in the caller's transaction."""
        return Task(name, task_type, target, args, self.owner, time.time() + self.lease_s)

    def submit(self, name: str, task_type: str = "") -> None:
        """Run a task this process owns (call after the transaction that created it commits)."""
        self.start()
        with self._guard:
            self._mine.add(name)
        self._queue_for(task_type).put(name)

    def start(self) -> None:
        with self._guard:
            if self._started:
                return
            self._started = True
        ref = weakref.ref(self)
        for i in range(self._threads):
            threading.Thread(target=_work_loop, args=(ref, self._queue), daemon=True,
                             name=f"mlemu-task-{i}").start()
        if any(h.long for h in self._handlers.values()):
            for i in range(self._long_threads):
                threading.Thread(target=_work_loop, args=(ref, self._long_queue), daemon=True,
                                 name=f"mlemu-task-long-{i}").start()
        threading.Thread(target=_tick_loop, args=(ref, self.tick_s), daemon=True,
                         name="mlemu-task-lease").start()

    def busy(self) -> set[str]:
        with self._guard:
            return set(self._mine)

    def wait_idle(self, timeout: float) -> bool:
        """Block until this process runs no task (tests and graceful shutdown)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._mine:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def run(self, name: str) -> None:
        later = False
        try:
            task = get(self.store, name)
            if task is None or task.owner != self.owner:
                return
            h = self.handler(task.type)
            if h is None:
                return
            result: Any = None
            held = self._held(task)
            if isinstance(held, float):  # not yet: a timer queues it again, no thread waits
                later = True
                timer = threading.Timer(held, self._queue_for(task.type).put, (name,))
                timer.daemon = True
                timer.start()
                return
            error: ApiError | None = held
            instruments = getattr(self.context, "instruments", None)
            if instruments is not None:
                instruments.operation(task.type, None)
            try:
                if error is None:
                    result = h.work(self.context, task)
            except ApiError as exc:
                error = exc
            except Exception as exc:  # a bug in one task must not kill the runner
                log.exception("operation %s failed", name)
                error = Internal(f"Internal error: {type(exc).__name__}: {exc}")
            if instruments is not None:
                instruments.operation(task.type, "FAILED" if error is not None else "SUCCEEDED")
            with self.store.transaction():
                current = get(self.store, name)
                if current is None or current.owner != self.owner:
                    return  # cancelled or adopted meanwhile: its outcome is someone else's
                h.finish(self.context, current, result, error)
                delete(self.store, name)
        finally:
            if not later:
                with self._idle:
                    self._mine.discard(name)
                    self._holding.pop(name, None)
                    self._idle.notify_all()

    def _queue_for(self, task_type: str) -> queue.Queue[str]:
        h = self.handler(task_type)
        return self._long_queue if h is not None and h.long else self._queue

    def _held(self, task: Task) -> float | ApiError | None:
        """The timing rule's verdict on a task (`hold`): seconds until it is asked again, the
        error the task ends with instead of its work, or None to run it now."""
        hold = self.hold
        if hold is None:
            return None
        with self._guard:
            began = self._holding.setdefault(task.name, time.monotonic())
        return hold(task.type, task.name, time.monotonic() - began)

    def tick(self) -> None:
        """Renew the leases of tasks running here, then adopt tasks nobody runs any more."""
        now = time.time()
        mine = self.busy()
        if mine:
            with self.store.transaction():
                for name in mine:
                    task = get(self.store, name)
                    if task is not None and task.owner == self.owner:
                        task.lease_until = now + self.lease_s
                        put(self.store, task)
        for task in pending(self.store):
            if task.name not in mine and self.handler(task.type) is not None and self._orphaned(task, now):
                self.adopt(task.name)
        if self.on_tick is not None:
            self.on_tick()

    def _orphaned(self, task: Task, now: float) -> bool:
        # A lapsed lease covers every case, including this process's own task whose finish
        # failed; a provably dead owner is only a shortcut.
        return task.lease_until < now or (task.owner != self.owner and owner_is_dead(task.owner))

    def adopt(self, name: str) -> bool:
        """Claim an orphaned task and run it again (or fail it after MAX_ATTEMPTS)."""
        with self.store.transaction():
            task = get(self.store, name)
            if task is None or name in self.busy() or not self._orphaned(task, time.time()):
                return False  # finished, running here, or another process adopted it first
            h = self.handler(task.type)
            if h is None:
                return False
            if task.attempts >= MAX_ATTEMPTS:
                log.warning("operation %s was interrupted %d times; failing it", name, task.attempts)
                h.finish(self.context, task, None, Aborted(
                    f"The operation was interrupted {task.attempts} times (its server stopped "
                    "while running it) and was not retried again."))
                delete(self.store, name)
                return False
            log.info("adopting operation %s from %s", name, task.owner)
            task.owner, task.lease_until = self.owner, time.time() + self.lease_s
            task.attempts += 1
            put(self.store, task)
        self.submit(name, task.type)
        return True


def _work_loop(ref: weakref.ref[TaskRunner], jobs: queue.Queue[str]) -> None:
    while True:
        try:
            name = jobs.get(timeout=5.0)
        except queue.Empty:
            if ref() is None:
                return
            continue
        runner = ref()
        if runner is None:
            return
        try:
            runner.run(name)
        except Exception:  # the store failed while finishing: the lapsed lease brings it back
            log.exception("operation %s could not be finished", name)
        del runner


def _tick_loop(ref: weakref.ref[TaskRunner], tick_s: float) -> None:
    first = True
    while True:
        if not first:
            time.sleep(tick_s)
        first = False
        runner = ref()
        if runner is None:
            return
        try:
            runner.tick()
        except Exception:  # a locked or closed store must not stop the loop
            log.exception("task lease/adoption pass failed")
        del runner
