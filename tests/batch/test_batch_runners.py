"""Warm batch job runners (batch/runner.py, batch/runners.py): jobs of one framework share one
runner process, which forks each job's process; an idle runner ends by itself after its idle
time and the next job starts a fresh one; a runner that dies fails its running job at once,
leaves none of the job's processes behind, and the next job gets a fresh runner.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from batch.launcher import Run
from batch.runner import idle_expired
from batch.runners import Runners
from batch.spec import JobSpec
from tests.kit import batchkit

pytestmark = pytest.mark.slow


def _spec(tmp_path: Path, name: str, rows: int, seconds: float = 0.0) -> JobSpec:
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "slow_predictor.py").write_text(batchkit.slow_predictor(seconds))
    (tmp_path / f"{name}.json").write_text(
        "".join(json.dumps([float(i), 1.0]) + "\n" for i in range(rows)))
    return JobSpec(input_paths=[str(tmp_path / f"{name}.json")], data_format="JSON",
                   output_path=str(tmp_path / f"{name}-out"), model_dir=str(tmp_path / "model"),
                   prediction_class="slow_predictor.SlowPredictor",
                   package_uris=[str(tmp_path / "pkg")], batch_size=1, workers=1)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


Pools = Callable[[float], Runners]


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[Pools]:
    made: list[Runners] = []

    def make(idle_s: float) -> Runners:
        made.append(Runners(tmp_path / "jobs", idle_s))
        return made[-1]

    yield make
    for pool in made:
        pool.close()


def test_idle_expired_decides_by_the_idle_time() -> None:
    assert not idle_expired(None, 1000.0, 0.0)  # a job is running
    assert not idle_expired(100.0, 159.9, 60.0)
    assert idle_expired(100.0, 160.0, 60.0)
    assert idle_expired(100.0, 100.0, 0.0)  # 0: as soon as the jobs are done


def test_jobs_of_one_framework_share_a_warm_runner(tmp_path: Path, runners: Pools) -> None:
    pool: Runners = runners(600.0)
    pids, parents = [], []
    for name in ("first", "second"):
        run = Run(_spec(tmp_path, name, 30, seconds=0.02), tmp_path / name, pool)
        parents.append(_parent(run.proc.pid))  # alive: 30 rows at 20 ms each
        assert run.proc.wait(timeout=120) == 0
        assert run.result() == {"predictions": 30, "errors": 0}
        pids.append(run.proc.pid)
        assert sorted(batchkit.results(batchkit.local_outputs(tmp_path / f"{name}-out"))) == \
            sorted(float(i) + 1.0 for i in range(30))
    [runner] = pool.running()
    assert parents == [runner.proc.pid, runner.proc.pid] and pids[0] != pids[1]
    assert runner.ready is not None and runner.ready["ready"] is True


def test_an_idle_runner_ends_and_the_next_job_starts_a_fresh_one(tmp_path: Path,
                                                                 runners: Pools) -> None:
    pool: Runners = runners(0.5)
    run = Run(_spec(tmp_path, "first", 5), tmp_path / "first", pool)
    assert run.proc.wait(timeout=120) == 0
    [runner] = pool.running() or [None]
    assert runner is not None
    assert runner.proc.wait(timeout=60) == 0  # ended by itself: nothing else closes it
    assert pool.running() == []
    run = Run(_spec(tmp_path, "second", 5), tmp_path / "second", pool)
    assert run.proc.wait(timeout=120) == 0
    assert run.result() == {"predictions": 5, "errors": 0}
    assert [r.proc.pid for r in pool.running()] != [runner.proc.pid]


def test_a_dead_runner_fails_its_job_and_the_next_job_gets_a_fresh_one(tmp_path: Path,
                                                                      runners: Pools) -> None:
    pool: Runners = runners(600.0)
    spec = _spec(tmp_path, "slow", 2000, seconds=0.02)
    spec.workers = 2  # a fork server and two workers in the job's group too
    run = Run(spec, tmp_path / "slow", pool)
    deadline = time.monotonic() + 60
    while not run.progress()[0] and time.monotonic() < deadline:
        assert not run.poll(), run.result()
        time.sleep(0.05)
    group = batchkit.group_members(run.proc.pid)
    assert len(group) >= 4  # the job's process, its fork server, two workers
    [runner] = pool.running()
    os.kill(runner.proc.pid, signal.SIGKILL)
    assert run.proc.wait(timeout=30) == -signal.SIGKILL
    assert run.result() == {"error": "The batch prediction job runner died (killed by signal 9)."}
    deadline = time.monotonic() + 10
    while batchkit.live(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert batchkit.live(group) == []
    run = Run(_spec(tmp_path, "next", 5), tmp_path / "next", pool)
    assert run.proc.wait(timeout=120) == 0
    assert run.result() == {"predictions": 5, "errors": 0}
    assert [r.proc.pid for r in pool.running()] != [runner.proc.pid]
