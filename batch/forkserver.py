"""The fork server of a job's local workers: one pre-warmed process that forks every Beam SDK
worker of a DirectRunner job, instead of Beam starting a fresh interpreter per worker.

Beam's multi-processing FnApiRunner starts each worker as a new `python -m
apache_beam.runners.worker.sdk_worker_main` (apache_beam/runners/portability/
fn_api_runner/fn_runner.py, FnApiRunner.run_pipeline; local_job_service.py, SubprocessSdkWorker),
so every worker pays the Beam import and the model framework's import again (bench/NOTES.md has
what that costs with scikit-learn), after the pipeline's process has paid its own. Here the
job's process (itself a fork of a warm runner that imported Beam, the pipeline and the framework:
batch/runner.py) forks this server first thing, before it starts any thread, and the server
forks one child per worker asked for
(batch/workerpool.py asks, from Beam's StartWorker). A child runs the same entry point as Beam's
own workers, sdk_worker_main.main, with the same environment variables
(CONTROL_API_SERVICE_DESCRIPTOR, PIPELINE_OPTIONS, WORKER_ID; no logging service: a worker
logs to the job's log itself).

Forking is safe because this process never starts gRPC (it imports the modules only; every
channel is made by a child, after the fork) and imports no framework that starts threads:
TensorFlow is never imported here, OpenBLAS loads without its pool (OPENBLAS_NUM_THREADS=1, the
policy of predictors/preload.py, which lists the modules), and the model itself is loaded in each
worker (XGBoost's OpenMP pool starts on use). The one thread Beam's import starts is pyarrow's
jemalloc background thread, which jemalloc's own fork handlers reset in the child
(background_thread.c, background_thread_postfork_child).

Life time: the server and its children are in the pipeline's process group (a cancel kills them
all with it). The server ends when the pipeline process closes its end of the pipe (or dies),
killing the children left; each child gets SIGKILL if the server dies first (PR_SET_PDEATHSIG),
so no worker outlives its job. Protocol: one JSON object per line; in: `{"env": {...}}`; out:
`{"ready": true}` or `{"error": "..."}` once, then `{"pid": N}` per fork and
`{"exit": N, "status": "..."}` per child that ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

from batch.runners import end_child
from batch.spec import JobSpec

PR_SET_PDEATHSIG = 1
#: Longest interval between two looks at whether the fork server has exited.
REAP_POLL_S = 0.01
#: What every worker imports before its first bundle: Beam's harness and the pipeline's DoFns.
BEAM_MODULES = ("apache_beam.runners.worker.sdk_worker_main", "batch.pipeline")


def worker_modules(spec: JobSpec) -> list[str]:
    """The modules `spec`'s workers need imported (its runner, batch/runner.py, imports them
    before it forks the job's process, whose fork server forks the workers): Beam's, and the model
    framework's as predictors/preload.py lists them (none of which starts a thread as it
    imports). A pickled model of unnamed framework is taken as
    scikit-learn (XGBoost's pickled estimators import it too)."""
    from predictors import find_model_file, preload

    framework = spec.framework.upper()
    if not framework and not spec.prediction_class and os.path.isdir(spec.model_dir):
        with contextlib.suppress(Exception):  # a bad model directory: the workers say why
            framework = find_model_file(spec.model_dir)[1] or "SCIKIT_LEARN"
    return [*BEAM_MODULES, *preload.MODULES.get(framework, ())]


class ForkServer:
    """The pipeline process's handle on its fork server (stdlib only: made before Beam loads)."""

    def __init__(self, modules: list[str], on_death: Callable[[str], None]) -> None:
        """Fork the server, which imports `modules` (a job's process forked by a warm runner,
        batch/runner.py, has imported them already and runs no thread yet); `on_death(message)`
        is called (from a thread) if a worker or the server itself dies while the job runs."""
        self.on_death = on_death
        self.finished = False
        self._lock = threading.Lock()
        self._replies: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self.workers: list[int] = []
        self.error = ""  # the server's start-up failure, once known
        self.proc = _Forked(modules)
        threading.Thread(target=self._read, name="forkserver-replies", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            reply = json.loads(line)
            if "exit" in reply:
                if reply["status"] != "exited with code 0" and not self.finished:
                    self.on_death(f"Batch prediction worker {reply['exit']} {reply['status']}.")
                continue
            self.error = self.error or reply.get("error", "")
            with self._arrived:
                self._replies.append(reply)
                self._arrived.notify_all()
        code = self.proc.wait()
        message = self.error or f"The batch prediction workers' fork server ended (code {code})."
        with self._arrived:
            self._replies.append({"error": message})
            self._arrived.notify_all()
        if not self.finished:
            self.on_death(message)

    def _next(self) -> dict[str, Any]:
        with self._arrived:
            self._arrived.wait_for(lambda: bool(self._replies))
            reply = self._replies[0]
            if "error" not in reply:  # an error stays: every later request gets it too
                self._replies.pop(0)
            return reply

    def fork(self, env: dict[str, str]) -> int:
        """A new worker running with `env`; its pid. RuntimeError saying why if the server
        could not start (e.g. the framework failed to import)."""
        with self._lock:
            if not self.workers:
                ready = self._next()
                if "error" in ready:
                    raise RuntimeError(ready["error"])
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(json.dumps({"env": env}).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:
                pass  # the server is gone: its reader says why
            reply = self._next()
            if "error" in reply:
                raise RuntimeError(reply["error"])
            self.workers.append(int(reply["pid"]))
            return self.workers[-1]

    def close(self) -> None:
        """End the server (and any worker left), and wait for it, so its CPU and its workers'
        count as this process's children."""
        self.finished = True
        end_child(self.proc)


class _Forked:
    """The part of Popen's interface ForkServer uses, over a fork of this process serving."""

    def __init__(self, modules: list[str]) -> None:
        requests, self._requests = os.pipe()
        self._replies, replies = os.pipe()
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                os.close(self._requests)  # else the server would never see the job's end
                os.close(self._replies)
                code = serve(modules, parent, os.fdopen(requests, "rb"), os.fdopen(replies, "wb"))
            finally:
                os._exit(code)
        os.close(requests)
        os.close(replies)
        self.stdin = os.fdopen(self._requests, "wb")
        self.stdout = os.fdopen(self._replies, "rb")
        self.returncode: int | None = None
        self._reaping = threading.Lock()

    def wait(self, timeout: float | None = None) -> int:
        # Polled (two threads may wait). A job's end waits here (ForkServer.close; the server
        # exits a millisecond or two after its stdin's end): the first looks come soon.
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = REAP_POLL_S / 16
        while True:
            with self._reaping:  # two threads wait (the reply reader and close)
                if self.returncode is None:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
                if self.returncode is not None:
                    return self.returncode
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("batch.forkserver", timeout or 0)
            time.sleep(pause)
            pause = min(pause * 2, REAP_POLL_S)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent ends (Linux; elsewhere the process group's kill by
    a cancel and the control channel's end still stop it)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the call above
        os._exit(1)


def exit_status(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return f"was killed by signal {-code} ({signal.Signals(-code).name})"
    return f"exited with code {code}"


def _run_worker(env: dict[str, str], server: int, replies: int) -> None:
    """In a forked child: run the Beam SDK harness as sdk_worker_main does, then end without the
    interpreter's teardown (unloading Beam and the framework took 0.2-0.3 s per worker, and the
    runner has everything it needs once the control stream ended)."""
    code = 1
    try:
        die_with_parent(server)
        os.close(replies)  # the server's alone: its end tells the pipeline process it is gone
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(2, 1)  # stdout is the reply pipe: worker output goes to the pipeline's log
        os.close(null)
        os.environ.update(env)
        _log_to_stderr()
        from apache_beam.runners.worker import sdk_worker_main

        sdk_worker_main.main([])
        code = 0
    except BaseException:  # noqa: BLE001 - reported in the log; the exit status says it
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _log_to_stderr() -> None:
    """A worker's log records go to its stderr, the job's log (batch/workerpool.py gives it no
    logging service), at the job process's level (WARNING, batch/job.py): what Beam's logging
    service re-logged there (BasicLoggingService, apache_beam/runners/portability/fn_api_runner/
    worker_handlers.py). The handler inherited from the job's process gives way to one naming
    the worker."""
    root = logging.getLogger()
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(
        f"%(levelname)s:batch worker {os.getpid()}:%(name)s:%(message)s"))
    root.addHandler(handler)


def serve(modules: list[str], parent: int, requests: BinaryIO, replies: BinaryIO) -> int:
    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message).encode() + b"\n")
        replies.flush()

    die_with_parent(parent)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # predictors/preload.py says why
    try:
        for name in modules:
            importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - the job fails with this message
        reply({"error": f"The batch prediction workers could not import {name}: "
                        f"{type(exc).__name__}: {exc}"})
        return 1
    reply({"ready": True})
    me, fd, pending = os.getpid(), requests.fileno(), b""
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([fd], [], [], 0.2)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                break
            children.discard(pid)
            reply({"exit": pid, "status": exit_status(status)})
        if not readable:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:  # the pipeline process is done (or gone): so are its workers
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            pid = os.fork()
            if pid == 0:
                _run_worker(json.loads(line)["env"], me, replies.fileno())
            children.add(pid)
            reply({"pid": pid})
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    return 0

