"""bench/jobwatch.py: the batch bench's watcher finds a job's forked workers once and then reads
only them, and reads memory on its schedule (a real process tree stands in for a job)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench import jobwatch, measure

# A "job" that forks a "fork server", which forks two "workers" and reports their pids; all of
# them then wait for the job's stdin to close.
TREE = """
import os, sys
server = os.fork()
if server == 0:
    kids = []
    for _ in range(2):
        kid = os.fork()
        if kid == 0:
            sys.stdin.read(); os._exit(0)
        kids.append(kid)
    print(*kids, flush=True); sys.stdin.read()
    for k in kids: os.waitpid(k, 0)
    os._exit(0)
sys.stdin.read(); os.waitpid(server, 0)
"""


@pytest.fixture
def job() -> Iterator[tuple[subprocess.Popen[str], set[int]]]:
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    workers = {int(p) for p in proc.stdout.readline().split()}
    yield proc, workers
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=120)


def test_workers_are_found_by_one_scan_then_read_directly(
        job: tuple[subprocess.Popen[str], set[int]]) -> None:
    proc, workers = job
    watch = jobwatch.Watch(proc.pid, forked_workers=2)
    for tick in range(12):
        watch.sample(tick)
    assert set(watch.workers) == workers
    assert watch.scans == 1  # all found at once: /proc is not scanned again
    assert set(watch.threads) == workers  # the job's own threads: not read once workers exist
    assert all(watch.threads[pid] for pid in workers)
    assert len(watch.tree) == 4  # job, fork server, two workers: memory covers them all
    assert watch.peak[0] > 0 and watch.peak[1] > 0  # tick 5 read the memory
    busiest = max(watch.workers, key=watch.workers.__getitem__)
    assert watch.path_s(99.0) == watch.before_workers[0] + watch.workers[busiest]
    assert watch.wait_s() >= 0.0


def test_a_job_without_forked_workers_is_never_scanned_for_them(
        job: tuple[subprocess.Popen[str], set[int]]) -> None:
    proc, _ = job
    watch = jobwatch.Watch(proc.pid, forked_workers=0)
    for tick in range(6):
        watch.sample(tick)
    assert watch.scans == 0 and watch.workers == {}
    assert watch.tree == [proc.pid]
    assert set(watch.threads) == {proc.pid}
    assert watch.before_workers[0] == jobwatch.process_cpu(proc.pid)
    assert watch.path_s(1.25) == 1.25  # one worker: the job's own CPU is the path
    # The peak covers the job process alone, not its (here present) children.
    assert watch.peak[0] == pytest.approx(measure.memory(proc.pid, [proc.pid])["rss_mib"],
                                          rel=0.5)


def test_a_worker_found_later_is_still_found() -> None:
    """Workers appear a moment after the job starts: the scan goes on until all are there."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE, text=True)
    try:
        watch = jobwatch.Watch(proc.pid, forked_workers=2)
        watch.sample(0)
        watch.sample(1)
        assert watch.scans == 2 and not watch.workers
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=120)


def test_memory_is_read_half_a_second_in_then_once_a_second() -> None:
    assert [t for t in range(31) if jobwatch.memory_due(t)] == [5, 15, 25]


def test_run_samples_until_the_job_ends() -> None:
    calls: list[float] = []
    left = [3]

    def running() -> bool:
        left[0] -= 1
        return left[0] >= 0

    watch = jobwatch.Watch(2 ** 22 + 1, forked_workers=0)  # no such pid: readings fail quietly
    watch.run(running, sleep=calls.append)
    assert calls == [jobwatch.TICK_S] * 3


def test_role_tells_the_fork_server_from_a_worker(
        job: tuple[subprocess.Popen[str], set[int]]) -> None:
    proc, workers = job
    tree = measure.tree(proc.pid)
    server = [p for p in tree[1:] if p not in workers]
    assert [jobwatch.role(p, proc.pid) for p in server] == ["forkserver"]
    assert {jobwatch.role(p, proc.pid) for p in workers} == {"worker"}
