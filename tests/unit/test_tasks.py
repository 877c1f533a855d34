"""registry/tasks.py on its own: several runners (as several processes or instances would) share
one store, and an orphaned task is adopted and run by exactly one of them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from registry import tasks
from registry.store import SqliteStore, Store

RUNS: list[str] = []
FINISHED: list[tuple[str, str]] = []
_LOCK = threading.Lock()


def _work(context: Any, task: tasks.Task) -> str:
    with _LOCK:
        RUNS.append(task.name)
    time.sleep(0.2)  # long enough for the other runners to try their luck meanwhile
    return str(context)


def _finish(context: Any, task: tasks.Task, result: Any, error: Any) -> None:
    FINISHED.append((task.name, result))


def _runner(store: Store, context: Any) -> tasks.TaskRunner:
    runner = tasks.TaskRunner(store, context)
    runner.register("TEST_COUNTED", _work, _finish)
    return runner


def adopt_orphan_race(make_store: Callable[[], Store]) -> None:
    """An orphaned task seen by 4 runners at the same moment, each on its own connection to one
    shared store, is run and finished by exactly one of them."""
    RUNS.clear()
    FINISHED.clear()
    seed = make_store()
    with seed.transaction():
        tasks.put(seed, tasks.Task("op-1", "TEST_COUNTED", "target", {}, "gone|b|n|1|1|x",
                                   time.time() - 1))
    runners = [_runner(make_store(), f"runner-{i}") for i in range(4)]
    start = threading.Barrier(len(runners))

    def tick(runner: tasks.TaskRunner) -> None:
        start.wait()
        runner.tick()

    threads = [threading.Thread(target=tick, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for runner in runners:
        assert runner.wait_idle(30)
    assert RUNS == ["op-1"]
    assert len(FINISHED) == 1 and FINISHED[0][1].startswith("runner-")
    assert tasks.pending(seed) == []


def test_an_orphan_is_adopted_by_exactly_one_of_many_runners(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    adopt_orphan_race(lambda: SqliteStore(path))


def test_a_pid_is_compared_only_on_the_same_known_machine() -> None:
    from registry import owners

    me = owners.this_owner()
    host, boot, ns, pid, start, rnd = me.split("|")
    assert not owners.owner_is_dead(me)
    gone = "999999999"  # above pid_max: no such process here
    assert owners.owner_is_dead("|".join([host, boot, ns, gone, start, rnd]))
    # Another boot (another machine, or another gVisor sandbox) or an unknown boot id or pid
    # namespace: nothing is provable from here, so the lease decides.
    for other in ([host, "other-boot", ns], [host, "", ns], [host, boot, ""], ["other", boot, ns]):
        assert not owners.owner_is_dead("|".join([*other, gone, start, rnd]))
