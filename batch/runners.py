"""The server's warm job runners (batch/runner.py): at most one per set of modules a job needs
(Beam's and its framework's), started by the first such job and reused by the next ones.

A runner ends by itself after `idle_s` seconds without a job (MLEMU_BATCH_RUNNER_IDLE_S; 0: as
soon as its jobs are done, i.e. a fresh runner per job), so an idle server holds at most one
runner per framework for that long and none after. A runner that dies (killed, out of memory)
fails the jobs it was running at once: their `JobProcess`es end with a message saying so, and
the next job starts a fresh runner. Stdlib only: the server never imports Beam.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
RUNNER_DIED = "The batch prediction job runner died ({status})."
#: Longest a job waits for its runner's imports (a few seconds; minutes on a loaded machine).
START_S = 600.0


class RunnerGone(RuntimeError):
    """The runner ended before it took the job (its idle time ran out meanwhile, or it died)."""


class JobProcess:
    """One job's process, a child of a runner: the part of Popen's interface the launcher and
    the bench use (pid, poll, wait, returncode), fed by the runner's exit messages."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.status = ""  # "exited with code 0", "was killed by signal 9 (SIGKILL)", ...
        self.cpu_s = 0.0  # CPU time (user + sys) of the job's process tree, once ended
        self.failure = ""  # why the job ended without its result (its runner died)
        self._ended = threading.Event()

    def end(self, status: str, returncode: int, cpu_s: float = 0.0, failure: str = "") -> None:
        if not self._ended.is_set():
            self.status, self.cpu_s, self.failure = status, cpu_s, failure
            self.returncode = returncode
            self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"batch job {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode


class Runner:
    """One runner process and the jobs it runs."""

    def __init__(self, modules: list[str], idle_s: float, jobs_dir: Path, env: dict[str, str]) -> None:
        jobs_dir.mkdir(parents=True, exist_ok=True)
        self.modules = modules
        self.jobs: dict[int, JobProcess] = {}
        self.error = ""  # the runner's start-up failure (an import), once known
        self._lock = threading.Lock()  # one job handed over at a time
        self._replies: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self.done = False
        self.ready: dict[str, Any] | None = None  # the runner's first reply
        with open(jobs_dir / "runners.log", "ab") as log:
            # Its own session: a signal to the server's process group is not one to a job's.
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "batch.runner", str(jobs_dir), json.dumps(modules),
                 repr(idle_s)], cwd=str(ROOT), env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        threading.Thread(target=self._read, name="batch-runner-replies", daemon=True).start()

    def _read(self) -> None:
        stdout: IO[bytes] = self.proc.stdout  # type: ignore[assignment]
        for line in stdout:
            reply = json.loads(line)
            if "exit" in reply:
                with self._arrived:
                    job = self.jobs.pop(reply["exit"], None)
                if job is not None:
                    job.end(reply["status"], reply["code"], reply["cpu_s"])
                continue
            self.error = self.error or reply.get("error", "")
            with self._arrived:
                self._replies.append(reply)
                self._arrived.notify_all()
        code = self.proc.wait()
        with self._arrived:
            self.done = True
            left, self.jobs = list(self.jobs.values()), {}
            self._arrived.notify_all()
        status = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        for job in left:  # they die with it (PR_SET_PDEATHSIG); say so now, not at a poll
            with contextlib.suppress(OSError):
                os.killpg(job.pid, signal.SIGKILL)
            job.end("was killed with its runner", -signal.SIGKILL,
                    failure=RUNNER_DIED.format(status=status))

    def _next(self) -> dict[str, Any]:
        with self._arrived:
            if not self._arrived.wait_for(lambda: bool(self._replies) or self.done, START_S):
                self.proc.kill()  # a hung import: its job fails, the next one starts afresh
                raise RuntimeError(f"The batch prediction job runner did not start in {START_S:g} s.")
            if not self._replies:
                raise RunnerGone(self.error or "The batch prediction job runner ended.")
            reply = self._replies[0]
            if "error" not in reply:  # an error stays: every later request gets it too
                self._replies.pop(0)
            return reply

    def start(self, spec_path: Path, log_path: Path, env: dict[str, str],
              ahead: list[str] | None = None) -> JobProcess:
        """Hand the runner a job; its process. RunnerGone if the runner ended first;
        RuntimeError saying why if it could not start (an import failed). `ahead`: the model's
        own modules, for the runner to import before it forks the job (batch/runner.py)."""
        with self._lock:
            # Sent at once: a new runner reads it once its imports are done (so even one whose
            # idle time is 0 finds it waiting), an idle one at once.
            request = {"spec": str(spec_path), "log": str(log_path), "env": env,
                       "modules": ahead or []}
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:
                pass  # it is gone: _next says so
            if self.ready is None:
                self.ready = self._next()
            if "error" in self.ready:
                raise RuntimeError(self.ready["error"])
            with self._arrived:  # registered before its exit can be read
                reply = self._next()
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                job = self.jobs[reply["started"]] = JobProcess(reply["started"])
            return job

    def alive(self) -> bool:
        return not self.done and self.proc.poll() is None

    def close(self) -> None:
        """End the runner (its jobs die with it) and wait for it."""
        end_child(self.proc)


class Child(Protocol):
    """What end_child uses of a child: Popen, or forkserver's Popen-like fork."""

    @property
    def stdin(self) -> IO[bytes] | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


def end_child(proc: Child) -> None:
    """End a child that serves requests read from its stdin (a runner, a fork server): close
    its stdin, which tells it to exit, and wait for it (killed after 10 s)."""
    with contextlib.suppress(OSError):
        assert proc.stdin is not None
        proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Runners:
    """A server's runners, one per set of modules; part of its Emulator's state."""

    def __init__(self, jobs_dir: Path, idle_s: float) -> None:
        self.jobs_dir = jobs_dir
        self.idle_s = idle_s
        self._runners: dict[tuple[str, ...], Runner] = {}
        self._lock = threading.Lock()

    def _runner(self, modules: list[str], fresh: bool) -> Runner:
        key = tuple(modules)
        with self._lock:
            runner = self._runners.get(key)
            if runner is None or fresh or not runner.alive():
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
                env.setdefault("OPENBLAS_NUM_THREADS", "1")  # predictors/preload.py says why
                runner = self._runners[key] = Runner(modules, self.idle_s, self.jobs_dir, env)
            return runner

    def start(self, modules: list[str], spec_path: Path, log_path: Path,
              env: dict[str, str], ahead: list[str] | None = None) -> JobProcess:
        """Run a job on the warm runner of `modules` (a fresh one if there is none, or if the
        one there ended before taking the job); `ahead` as Runner.start's."""
        try:
            return self._runner(modules, fresh=False).start(spec_path, log_path, env, ahead)
        except RunnerGone:
            return self._runner(modules, fresh=True).start(spec_path, log_path, env, ahead)

    def running(self) -> list[Runner]:
        with self._lock:
            return [r for r in self._runners.values() if r.alive()]

    def close(self) -> None:
        with self._lock:
            runners, self._runners = list(self._runners.values()), {}
        for runner in runners:
            runner.close()


def wait_gone(pgid: int, timeout: float) -> bool:
    """Whether process group `pgid` is empty within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
