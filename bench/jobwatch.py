"""What `python -m bench.batch` reads from /proc while a batch job runs: the job's peak memory,
its workers' CPU time and the run-queue wait of its critical path (bench/batch.py says what each
figure means).

The watcher runs beside the job, on the same two cores, so what it costs is taken from the job
it watches (a 2-worker job needs both cores). It therefore reads only what the figures need:
- the process tree is found by scanning /proc only until the job's forked workers are all there
  (they are forked once, at the job's start; a 1-worker job runs in its own process and forks
  none), then the same pids are read;
- memory (RSS and PSS, from smaps_rollup, whose cost grows with the processes' mappings) once a
  second, half a second after the job's start and every second after; the workers reach their
  peak when they have loaded the model, and hold it to the end;
- the job process's threads until the first worker appears (after that its figures are not
  used: the workers are the critical path), the workers' threads every tick (a worker's work
  thread ends before its process, so its last figures are kept).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from bench import measure

#: Seconds between two readings of the workers' CPU and threads.
TICK_S = 0.1
#: Memory is read on ticks MEMORY_PHASE, MEMORY_PHASE + MEMORY_TICKS, ...
MEMORY_TICKS = 10
MEMORY_PHASE = 5


def memory_due(tick: int) -> bool:
    """Whether tick number `tick` reads the tree's memory."""
    return tick % MEMORY_TICKS == MEMORY_PHASE


class Watch:
    """Figures of one running job's process tree, filled in by `run` (in a thread of its own)."""

    def __init__(self, pid: int, forked_workers: int) -> None:
        """`pid`: the job's process; `forked_workers`: how many worker processes it forks (0:
        its workers run in its own process)."""
        self.pid = pid
        self.forked_workers = forked_workers
        self.peak = [0.0, 0.0]  # RSS, PSS (MiB; forked workers share their fork server's pages)
        self.workers: dict[int, float] = {}  # worker pid -> CPU seconds last seen
        self.before_workers = [0.0, 0.0]  # the job process's CPU and wait until a worker appeared
        self.threads: dict[int, dict[int, tuple[int, int]]] = {}  # pid -> tid -> (CPU, wait) ns
        self.tree: list[int] = [pid]
        self.scans = 0  # /proc scans made (a test reads it)

    def _find(self) -> None:
        """Look for the job's workers, until all of them are found."""
        if len(self.workers) >= self.forked_workers:
            return
        self.scans += 1
        self.tree = measure.tree(self.pid)
        for pid in self.tree[1:]:
            if role(pid, self.pid) == "worker":
                self.workers.setdefault(pid, 0.0)

    def sample(self, tick: int) -> None:
        """One reading; `tick` counts them from 0."""
        self._find()
        if memory_due(tick):
            mem = measure.memory(self.pid, self.tree)
            self.peak[0] = max(self.peak[0], mem["rss_mib"])
            self.peak[1] = max(self.peak[1], mem["pss_mib"])
        if not self.workers:
            thread_times(self.pid, self.threads)
            self.before_workers[:] = process_cpu(self.pid), busiest_wait(self.threads.get(self.pid,
                                                                                          {}))
        for pid in self.workers:
            with contextlib.suppress(OSError):  # ended: its last figures stay
                self.workers[pid] = process_cpu(pid)
                thread_times(pid, self.threads)

    def run(self, running: Callable[[], bool], sleep: Callable[[float], None] = time.sleep) -> None:
        """Sample every TICK_S while `running()`."""
        tick = 0
        while running():
            with contextlib.suppress(Exception):  # a process ending between two reads
                self.sample(tick)
            tick += 1
            sleep(TICK_S)

    def path_s(self, cpu_s: float) -> float:
        """The CPU critical path (bench/batch.py): `cpu_s`, the job's CPU, with no forked workers."""
        if not self.workers:
            return cpu_s
        return self.before_workers[0] + max(self.workers.values())

    def wait_s(self) -> float:
        """Run-queue wait of the critical path's busiest threads."""
        if not self.workers:
            return busiest_wait(self.threads.get(self.pid, {}))
        busiest = max(self.workers, key=self.workers.__getitem__)
        return busiest_wait(self.threads.get(busiest, {})) + self.before_workers[1]


def role(pid: int, pipeline: int) -> str:
    """"forkserver" (the pipeline process's child: batch/forkserver.py) or "worker" (a Beam SDK
    harness the fork server forked)."""
    ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return "forkserver" if ppid == pipeline else "worker"


def thread_times(pid: int, seen: dict[int, dict[int, tuple[int, int]]]) -> None:
    """Record each thread of `pid`'s CPU time and run-queue delay (ns, /proc schedstat) into
    seen[pid]; a thread that has ended keeps its last figures (a worker's work thread ends
    before the process does)."""
    mine = seen.setdefault(pid, {})
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            cpu, wait = (task / "schedstat").read_text().split()[:2]
            mine[int(task.name)] = (int(cpu), int(wait))


def busiest_wait(times: dict[int, tuple[int, int]]) -> float:
    """Seconds the busiest thread (the most CPU: the one doing the work) was runnable but not
    running. One thread, not their sum: a worker's gRPC threads wait for a CPU at the same time
    as its work does."""
    return max(times.values(), default=(0, 0))[1] / 1e9


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
