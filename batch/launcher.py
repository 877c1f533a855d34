"""The server's side of a batch prediction run: hand the job to a warm runner, watch, cancel.

The pipeline runs in a job process forked by the server's warm runner for the job's framework
(batch/runners.py, batch/runner.py, batch/job.py), in a session of its own, off the request thread
and out of the serving process: a cancel kills that whole process group (the job's process, its
fork server and every worker), and a crash there cannot hurt serving.
Its working directory (spec, result, progress, log) is under the state directory's `jobs/`
folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

from batch.forkserver import worker_modules
from batch.job import RESULT_BASENAME
from batch.model_modules import model_modules
from batch.runners import Runners, wait_gone
from batch.spec import LOCAL_RUNNER, JobSpec

#: Longest `Run.cancel` waits for the job's processes to be gone after the kill.
GROUP_EXIT_S = 5.0


class Run:
    """One running job's process."""

    def __init__(self, spec: JobSpec, workdir: Path, runners: Runners | None = None) -> None:
        """Start the job on `runners` (None: a runner of its own, which ends with the job)."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.result_path = workdir / RESULT_BASENAME
        self.result_path.unlink(missing_ok=True)
        progress = workdir / "progress"
        progress.write_text("")
        spec.progress_path = str(progress) if spec.runner == LOCAL_RUNNER else ""
        spec_path = workdir / "spec.json"
        spec.write(spec_path)
        env = {"STORAGE_EMULATOR_HOST": spec.storage_emulator_host} \
            if spec.storage_emulator_host else {}
        self.runners = runners if runners is not None else Runners(workdir, 0.0)
        try:
            self.proc = self.runners.start(worker_modules(spec), spec_path,
                                           workdir / "pipeline.log", env,
                                           model_modules(spec.model_dir, spec.framework))
        except RuntimeError as exc:  # the runner could not import Beam or the framework
            self.result_path.write_text(json.dumps({"error": str(exc)}))
            self.proc = None  # type: ignore[assignment]

    def poll(self) -> bool:
        """True once the process has ended."""
        return self.proc is None or self.proc.poll() is not None

    def progress(self) -> tuple[int, int]:
        """(predictions, errors) the workers reported so far."""
        done = failed = 0
        try:
            text = (self.workdir / "progress").read_text()
        except OSError:
            return 0, 0
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                done, failed = done + int(parts[0]), failed + int(parts[1])
        return done, failed

    def cancel(self) -> None:
        """Kill the job's process and every worker it started; return once none of them is left
        (a killed process's exit is asynchronous: its children may take a moment after it is
        reaped), or after GROUP_EXIT_S."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(GROUP_EXIT_S)
        wait_gone(self.proc.pid, GROUP_EXIT_S)

    def result(self) -> dict[str, Any]:
        if self.proc is not None and self.proc.failure:
            return {"error": self.proc.failure}
        try:
            return dict(json.loads(self.result_path.read_text()))
        except (OSError, ValueError):
            tail = ""
            with contextlib.suppress(OSError):
                tail = (self.workdir / "pipeline.log").read_text(errors="replace")[-500:]
            status = self.proc.status if self.proc is not None else ""
            return {"error": f"The pipeline process {status or 'ended'} without a result. "
                             f"{tail.strip()}".strip()}
