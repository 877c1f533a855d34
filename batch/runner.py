"""A warm job runner: `python -m batch.runner JOBS_DIR MODULES_JSON IDLE_S`, one process that has
imported Beam, mlemu's pipeline and a model framework, and forks one process per batch job.

Started fresh, a job would pay Python's start, Beam's import and the framework's (and, with
several workers, a fork server importing them again) before its first record; for a job of a few
seconds that fixed cost decided its speed (bench/notes/batch-jobs.md has the figures). The
server keeps one runner per set of modules (batch/runners.py) and hands it jobs; a job's process
is a fork of the runner, so it starts with everything imported, and its own fork server
(batch/forkserver.py) is a fork of the job's process, before any thread or gRPC channel exists
there.

Forking is safe for the same reasons as the fork server's: this process imports modules only
(no gRPC channel, no framework that starts threads: predictors/preload.py's modules start none
as they import, OpenBLAS loads without its pool) and runs one Python thread; `ready` reports the
OS threads counted after the imports (Beam's import starts one: pyarrow's jemalloc thread, which
batch/forkserver.py explains).

Life time. A job's process starts a session of its own (a cancel kills its process group: the
job, its fork server, its workers) and dies with the runner (PR_SET_PDEATHSIG: the runner's one
thread forked it). The runner ends when the server closes its end of the pipe, when the server
process is gone (its parent changed: then it kills its jobs' groups first), or after IDLE_S
seconds without a job (0: as soon as its jobs are done), which bounds an idle runner's memory.
Protocol, one JSON object per line: in `{"spec": PATH, "log": PATH, "env": {...}, "modules": [...]}`
(`modules`: the model's own modules, batch/model_modules.py, imported here before the fork when
they belong to a package this runner has imported, so the runner stays warm for that model
class too); out
`{"ready": true, "threads": N}` or `{"error": "..."}` once, then `{"started": PID}` per job in
request order and `{"exit": PID, "status": "...", "code": N, "cpu_s": X}` per job that ended (N as Popen's
returncode; X the CPU time of the job's process and every process it waited for).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from batch.forkserver import die_with_parent, exit_status

#: What every job's process needs beyond the framework: Beam, its portable runner and worker
#: pool, and mlemu's pipeline with what it loads models through.
RUNNER_MODULES = ("apache_beam", "apache_beam.runners.portability.fn_api_runner.fn_runner",
                  "apache_beam.transforms.environments", "batch.pipeline", "batch.workerpool",
                  "predictors", "registry.artifacts", "registry.gcs")
#: How often the runner looks at its parent and its jobs while nothing arrives.
TICK_S = 0.1

ROOT = Path(__file__).resolve().parent.parent


def idle_expired(idle_since: float | None, now: float, idle_s: float) -> bool:
    """Whether a runner idle since `idle_since` (None: a job is running) should end at `now`."""
    return idle_since is not None and now - idle_since >= idle_s


def import_ahead(modules: Iterable[str]) -> None:
    """Import each of `modules` whose top package is imported already (a framework's
    submodules, not new code); one that fails is left to the job, which says why."""
    before = len(sys.modules)
    for name in modules:
        if isinstance(name, str) and name.split(".", 1)[0] in sys.modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    if len(sys.modules) != before:
        import gc

        gc.freeze()  # as after the first imports: their pages stay shared by the forks


def _run_job(request: dict[str, Any], runner: int, pipes: tuple[int, ...]) -> None:
    """In a forked child: become the job's process (batch/job.run_job) and never return."""
    code = 1
    try:
        os.setsid()  # the job's own process group: a cancel's killpg reaches its workers too
        signal.set_wakeup_fd(-1)  # the runner's, below: not the job's
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        die_with_parent(runner)
        for fd in pipes:  # the runner's alone: a job must not keep the server's pipe open
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.update(request.get("env") or {})
        from batch import job

        job.run_job(Path(request["spec"]))  # ends the process itself
    except BaseException:  # noqa: BLE001 - the server reports the exit status; the log says why
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def serve(modules: list[str], idle_s: float, requests: BinaryIO, replies: BinaryIO,
          parent: int) -> int:
    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message).encode() + b"\n")
        replies.flush()

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # predictors/preload.py says why
    from predictors import preload

    try:
        for name in (*RUNNER_MODULES, *modules):
            importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - the job fails with this message
        reply({"error": f"The batch prediction runner could not import {name}: "
                        f"{type(exc).__name__}: {exc}"})
        return 1
    import gc

    gc.freeze()  # the imports' objects: never collected, so their pages stay shared by the forks
    reply({"ready": True, "threads": preload.threads()})
    me, fd, pending = os.getpid(), requests.fileno(), b""
    # A job's end wakes the loop at once (its exit is what the server waits for), not at a tick.
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    jobs: set[int] = set()
    idle_since: float | None = time.monotonic()
    while True:
        readable, _, _ = select.select([fd, woken], [], [], TICK_S)
        if woken in readable:
            os.read(woken, 512)
        while jobs:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if not pid:
                break
            jobs.discard(pid)
            reply({"exit": pid, "status": exit_status(status),
                   "code": os.waitstatus_to_exitcode(status),
                   "cpu_s": round(usage.ru_utime + usage.ru_stime, 3)})
        if os.getppid() != parent:  # the server is gone: so are its jobs
            break
        if jobs:
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        if fd not in readable:
            if idle_expired(idle_since, time.monotonic(), idle_s):
                break
            continue
        chunk = os.read(fd, 65536)
        if not chunk:  # the server closed its end
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            import_ahead(request.get("modules") or ())
            pid = os.fork()
            if pid == 0:
                _run_job(request, me, (fd, replies.fileno(), woken, wake))
            jobs.add(pid)
            idle_since = None
            reply({"started": pid})
    for pid in jobs:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything an import prints goes to the log, not into the replies
    os.chdir(ROOT)
    # argv[1], the server's jobs directory, is not read: it tells one server's runners apart.
    code = serve(json.loads(sys.argv[2]), float(sys.argv[3]), sys.stdin.buffer, replies,
                 os.getppid())
    replies.flush()
    os._exit(code)
