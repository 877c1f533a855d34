"""A DirectRunner job's forked workers (batch/forkserver.py, batch/workerpool.py), through the
job process a runner forks (batch/launcher.Run, batch/runner.py): the workers are children of the
job's fork server, itself a child of the job process; they predict every instance once; a cancel,
a crash of the job process or of one worker leaves no process behind (and fails the job saying
why); a framework that fails to import in the runner fails the job cleanly.
(tests/clients/test_batch_lifecycle.py compares a 2-worker job with online :predict and cancels
one through the jobs API.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from batch.launcher import Run
from batch.spec import JobSpec
from tests.kit import batchkit

pytestmark = pytest.mark.slow


def _job(tmp_path: Path, rows: int, **more: object) -> tuple[JobSpec, list[list[float]]]:
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "slow_predictor.py").write_text(batchkit.slow_predictor(0.02))
    data = [[float(i), 0.5, -2.0] for i in range(rows)]
    (tmp_path / "in.json").write_text("".join(json.dumps(r) + "\n" for r in data))
    spec = JobSpec(input_paths=[str(tmp_path / "in.json")], data_format="JSON",
                   output_path=str(tmp_path / "out"), model_dir=str(tmp_path / "model"),
                   prediction_class="slow_predictor.SlowPredictor",
                   package_uris=[str(tmp_path / "pkg")], batch_size=1, workers=2)
    for key, value in more.items():
        setattr(spec, key, value)
    return spec, data


def _workers(run: Run, count: int = 2, timeout: float = 60) -> tuple[int, list[int]]:
    """(fork server pid, worker pids) once `count` workers run: the fork server is the job
    process's child (a fork of it) that has children."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for server in batchkit.children(run.proc.pid):
            workers = batchkit.children(server)
            if len(workers) >= count:
                return server, workers
        assert run.proc.poll() is None, run.result()
        time.sleep(0.05)
    raise AssertionError("the job's workers did not start")


def _gone(pids: list[int], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while batchkit.live(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not batchkit.live(pids)


def _running(tmp_path: Path, runs: list[Run], rows: int) -> tuple[Run, int, list[int]]:
    """A 2-worker job over `rows` rows (a long one: 20 ms per row), once its workers run."""
    spec, _ = _job(tmp_path, rows)
    run = Run(spec, tmp_path / "work")
    runs.append(run)
    return (run, *_workers(run))


@pytest.fixture
def runs() -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:  # whatever a test left running
        if not run.poll():
            run.cancel()
        run.runners.close()


def test_workers_are_forked_by_the_fork_server(tmp_path: Path, runs: list[Run]) -> None:
    spec, data = _job(tmp_path, 150)
    run = Run(spec, tmp_path / "work")
    runs.append(run)
    server, workers = _workers(run)
    for pid in (server, *workers):  # one process group: a cancel's killpg reaches them all
        assert os.getpgid(pid) == run.proc.pid
    assert len(workers) == 2 and not any(batchkit.children(w) for w in workers)
    assert run.proc.wait(timeout=120) == 0
    assert run.result() == {"predictions": 150, "errors": 0}
    got = sorted(batchkit.results(batchkit.local_outputs(tmp_path / "out")))
    assert got == sorted(sum(row) for row in data)
    assert _gone([server, *workers])


def test_cancel_leaves_no_process(tmp_path: Path, runs: list[Run]) -> None:
    run, server, workers = _running(tmp_path, runs, 2000)
    run.cancel()
    assert batchkit.group_members(run.proc.pid) == []
    assert _gone([server, *workers], timeout=0)


def test_a_crashed_pipeline_process_takes_its_workers_along(tmp_path: Path,
                                                            runs: list[Run]) -> None:
    run, server, workers = _running(tmp_path, runs, 2000)
    os.kill(run.proc.pid, signal.SIGKILL)  # the pipeline process alone, not its group
    run.proc.wait()
    assert _gone([server, *workers])


def test_a_dead_worker_fails_the_job_at_once(tmp_path: Path, runs: list[Run]) -> None:
    run, server, workers = _running(tmp_path, runs, 2000)
    os.kill(workers[0], signal.SIGKILL)
    assert run.proc.wait(timeout=30) == 0
    assert run.result() == {"error": f"Batch prediction worker {workers[0]} was killed by "
                                     "signal 9 (SIGKILL)."}
    assert _gone([server, *workers])


def test_a_framework_failing_to_import_fails_the_job(tmp_path: Path, runs: list[Run],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "site" / "sklearn"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("this scikit-learn is broken")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))  # the pipeline process inherits it
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.joblib").write_bytes(b"never loaded")
    (tmp_path / "in.json").write_text("[1.0, 2.0]\n" * 10)
    spec = JobSpec(input_paths=[str(tmp_path / "in.json")], data_format="JSON",
                   output_path=str(tmp_path / "out"), model_dir=str(tmp_path / "model"),
                   framework="SCIKIT_LEARN", workers=2)
    run = Run(spec, tmp_path / "work")
    runs.append(run)
    assert run.poll()  # the job's runner could not start: the job fails before it runs
    assert run.result() == {"error": "The batch prediction runner could not import "
                                     "sklearn.base: ImportError: this scikit-learn is broken"}
    assert run.proc is None


LOGGING_PREDICTOR = '''
import logging


class LoggingPredictor:
    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        logging.getLogger("mlemu.test").info("an info record: below the job's level")
        logging.getLogger("mlemu.test").warning("predicting %d instances", len(instances))
        return [sum(row) for row in instances]
'''


def test_a_workers_warnings_reach_the_jobs_log(tmp_path: Path, runs: list[Run]) -> None:
    """Forked workers open no logging stream to the runner (batch/workerpool.py): they write
    their records to the job's log themselves, at the job's level, naming the worker."""
    spec, data = _job(tmp_path, 40)
    (tmp_path / "pkg" / "logging_predictor.py").write_text(LOGGING_PREDICTOR)
    spec.prediction_class, spec.batch_size = "logging_predictor.LoggingPredictor", 10
    run = Run(spec, tmp_path / "work")
    runs.append(run)
    assert run.proc.wait(timeout=120) == 0
    assert run.result() == {"predictions": 40, "errors": 0}
    log = (tmp_path / "work" / "pipeline.log").read_text()
    pids = re.findall(r"^WARNING:batch worker (\d+):mlemu\.test:predicting 10 instances$", log,
                      re.M)
    assert len(pids) == 4, log  # one line per model call, 40 rows in batches of 10
    assert str(run.proc.pid) not in pids  # written by the workers, not by the job's process
    assert "an info record" not in log
    assert "LogEntry" not in log and "log_location" not in log  # not relayed by the runner
