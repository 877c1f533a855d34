"""A batch job's process: runs one job's pipeline and writes its result file, then ends.

The process is a fork of a warm runner (batch/runner.py), in a session of its own, so a cancel
ends it, its workers' fork server and every worker at once (batch/forkserver.py: they also die
with it), and it dies with its runner, which ends when the server is gone (a job whose server is
gone is taken over by another server, which starts it again). Beam, the pipeline and the model's
framework are imported already; the fork server is a fork of this process, made before any
thread starts here.
The result file (RESULT_BASENAME beside the spec) is `{"predictions": N, "errors": M}` or
`{"error": "message"}`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

RESULT_BASENAME = "result.json"


def run_job(spec_path: Path) -> None:
    """Run the job `spec_path` describes, write its result file and end this process."""
    result_path = spec_path.with_name(RESULT_BASENAME)
    logging.basicConfig(level=logging.WARNING)
    from batch.spec import DASK_RUNNER, JobSpec

    spec = JobSpec.read(spec_path)
    forks = None
    if spec.forked_workers:
        # First, before any thread starts here: the fork server forks the workers from this
        # warm state (batch/forkserver.py). A worker or the server dying fails the job at once
        # (the runner itself would wait for the dead worker forever).
        from batch import forkserver

        forks = forkserver.ForkServer(forkserver.worker_modules(spec), on_death=lambda message:
                                      _finish(result_path, {"error": message}, forks))
    try:
        if spec.runner.rsplit(".", 1)[-1] == DASK_RUNNER:  # or Beam's module path of it
            from batch import distributed

            outcome: dict[str, object] = dict(distributed.run(spec))
        else:
            from batch import pipeline

            outcome = dict(pipeline.run(spec, forks))
    except Exception as exc:
        logging.getLogger("mlemu.batch").exception("batch prediction failed")
        # The fork server's own failure (e.g. the framework's import) says more than Beam's
        # "Error starting worker" around it.
        outcome = {"error": forks.error if forks is not None and forks.error else _reason(exc)}
    _finish(result_path, outcome, forks)


_FINISHING = threading.Lock()


def _finish(result_path: Path, outcome: dict[str, object], forks: Any) -> None:
    """Stop the workers' fork server (and any worker left), write the result file, end. Called
    once: a second caller (the end of the run racing a worker's death) waits here until the
    process ends."""
    _FINISHING.acquire()
    if forks is not None:
        forks.close()
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(outcome))
    os.replace(tmp, result_path)
    _exit_now(0)


def _exit_now(code: int) -> None:
    """End without the interpreter's teardown: with Beam, scikit-learn or TensorFlow loaded,
    unloading their modules takes 0.1-0.3 s more of every job, and nothing is left to do once
    the result file is in place (Beam has already stopped its workers)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _reason(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    # Beam wraps worker failures in long chained texts; the last line names the cause, and
    # Beam's " [while running 'Step']" after it names only the pipeline's step.
    lines = [line for line in str(message).strip().splitlines() if line.strip()]
    reason = lines[-1] if lines else type(exc).__name__
    return _BEAM_STEP.sub("", reason)[:2000]


_BEAM_STEP = re.compile(r" \[while running '[^']*'\]$")
