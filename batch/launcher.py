"""The server's side of a batch prediction run: start the pipeline's process, watch, cancel.

The pipeline runs in a child process (`python -m batch`, batch/__main__.py) in a session of its
own, off the request thread and out of the serving process: a cancel kills that whole process
group (the Beam runner and every worker it started), and a crash there cannot hurt serving.
Its working directory (spec, result, progress) is under the state directory's `jobs/` folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from batch.spec import JobSpec

#: Longest `Run.cancel` waits for the job's processes to be gone after the kill.
GROUP_EXIT_S = 5.0

ROOT = Path(__file__).resolve().parent.parent


class Run:
    """One running pipeline process."""

    def __init__(self, spec: JobSpec, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.result_path = workdir / "result.json"
        self.result_path.unlink(missing_ok=True)
        progress = workdir / "progress"
        progress.write_text("")
        spec.progress_path = str(progress)
        spec_path = workdir / "spec.json"
        spec.write(spec_path)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        if spec.storage_emulator_host:
            env["STORAGE_EMULATOR_HOST"] = spec.storage_emulator_host
        with open(workdir / "pipeline.log", "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "batch", str(spec_path)],
                                         cwd=str(ROOT), env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def poll(self) -> bool:
        """True once the process has ended."""
        return self.proc.poll() is not None

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
        """Kill the pipeline and every worker it started; return once none of them is left
        (a killed process's exit is asynchronous: its children may take a moment after the
        pipeline process is reaped), or after GROUP_EXIT_S."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + GROUP_EXIT_S
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)  # anyone left in the job's process group?
            except ProcessLookupError:
                return
            time.sleep(0.01)

    def result(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.result_path.read_text()))
        except (OSError, ValueError):
            tail = ""
            with contextlib.suppress(OSError):
                tail = (self.workdir / "pipeline.log").read_text(errors="replace")[-500:]
            return {"error": f"The pipeline process ended with code {self.proc.returncode} "
                             f"without a result. {tail.strip()}".strip()}
