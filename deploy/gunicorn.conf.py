"""gunicorn settings for mlemu, read from the same environment as settings.py.

Workers are threads-in-processes (gthread): model calls release the GIL for most of their time,
and processes give the rest of the request path real parallelism. The worker class is gthread
with the changes of deploy/worker.py (requests read under a deadline before a thread takes them,
gunicorn's errors as JSON), on the gunicorn versions it was tested with (deploy/fence.py);
MLEMU_WORKER_CLASS=gthread runs gunicorn's stock gthread. How many of each follows the
CPUs this container may use unless MLEMU_WORKERS / MLEMU_THREADS say otherwise
(Settings.worker_layout). The app is not preloaded: each worker opens the store after the fork.
The master imports the framework modules the bootstrap file needs (scikit-learn, XGBoost,
TensorFlow; predictors/preload.py, at the end), which start no thread as they import; OpenMP,
BLAS and TensorFlow thread pools start in the workers, never before a fork.

SIGTERM (Cloud Run, Knative and Kubernetes stop an instance with it, and kill it 10 s later):
the master closes its listening sockets and sends SIGTERM to every worker; a gthread worker then
stops accepting, lets every accepted request finish (at most graceful_timeout) and answers a
request arriving on a kept-alive connection with "Connection: close" (gunicorn/workers/gthread.py,
`run` and `finish_request`). Each worker still holds its own descriptor of the listening socket
until it exits, though, so without `post_worker_init` below a client connecting during the drain
would complete its TCP handshake into a backlog nobody accepts and be reset seconds later; with
it, the worker accepts what is already queued (those clients connected before the signal) and
closes its descriptor at once, so once every process has done so new connections are refused.
"""

import os
import queue
import select
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.settings import Settings
from deploy import fence
from deploy.connection_board import ConnectionBoard

_settings = Settings.from_env()
try:
    worker_class = fence.worker_class(_settings.worker_class)
except fence.UntestedGunicorn as exc:
    sys.exit(str(exc))  # one line, not gunicorn's "Failed to read config file" and a traceback

bind = f"{_settings.host}:{_settings.port}"
workers, threads = _settings.worker_layout()
preload_app = False
# Cloud Run sends SIGTERM and kills 10 s later: finish in-flight requests within 8 s.
graceful_timeout = 8
timeout = 120  # first requests may load a large model
# Google's API client (httplib2) reuses idle connections and does not retry a request whose body
# hits one the server has closed (BrokenPipeError, e.g. a :predict sent 6 s after the previous
# call with keepalive = 5). Google's front ends keep idle connections for minutes; so do we.
# gthread parks idle keep-alive connections in its poller, so they hold no thread.
keepalive = 120
loglevel = _settings.log_level
accesslog = None
errorlog = "-"
# gunicorn's own lines go the app's way (text or Cloud Logging JSON): deploy/gunicorn_logger.py.
logger_class = "deploy.gunicorn_logger.Logger"
proc_name = "mlemu"
# gunicorn's control socket (~/.gunicorn/gunicorn.ctl) is unused: $HOME is read-only for the
# container's user, and servers started side by side would share that one path.
control_socket_disable = True

#: Connections a stopping worker takes from the backlog before it closes its listener.
_BACKLOG_SWEEP = 1024


def _stop_listening(worker: Any) -> None:
    """Runs on the worker's main loop (never inside the signal handler, which may interrupt a
    poller call): accept what is queued, then close this process's listening descriptors."""
    if getattr(worker, "_mlemu_closed", False):
        return
    worker._mlemu_closed = True
    for listener in worker.sockets:
        for _ in range(_BACKLOG_SWEEP):
            try:
                queued, _, _ = select.select([listener], [], [], 0)
            except (OSError, ValueError):
                break
            if not queued:
                break
            worker.accept(listener)  # hands the connection to the thread pool like any other
    worker.set_accept_enabled(False)  # unregister from the poller while the descriptors are valid
    for listener in worker.sockets:
        listener.close()


def post_fork(server: Any, worker: Any) -> None:
    """In a new worker, before gunicorn gives it its own signal handlers: note a SIGTERM sent
    meanwhile, for `post_worker_init` to act on.

    A master told to stop while it is still starting workers sends SIGTERM to a worker forked a
    moment earlier. Until `Worker.init_signals` runs, that worker still has the master's handler,
    copied by fork, which only queues the signal in the worker's copy of the master's queue
    (gunicorn/arbiter.py, `Arbiter.signal`), where nothing reads it. The worker would then serve
    and accept connections until the master kills it at graceful_timeout.
    """
    queued = getattr(server, "SIG_QUEUE", None)
    early = False
    while queued is not None:
        try:
            early = queued.get_nowait() == signal.SIGTERM or early
        except queue.Empty:
            break
    worker.mlemu_stop_early = early

    def note(sig: int, frame: Any) -> None:
        worker.mlemu_stop_early = True

    signal.signal(signal.SIGTERM, note)


def _start_grpc(worker: Any) -> None:
    """The worker's gRPC server over the worker's own Emulator (grpcserve/in_worker.py), when
    gRPC is served inside the workers (a gRPC port, no MLEMU_GRPC_WORKERS). A port that cannot
    be bound ends the worker with gunicorn's boot-error status, which halts the master: one line
    says why."""
    worker.mlemu_grpc = None
    if not _settings.grpc_in_workers():
        return
    from grpcserve.in_worker import WorkerGrpc

    try:  # what is left of the master's graceful_timeout once the stop begins
        worker.mlemu_grpc = WorkerGrpc(worker.wsgi.extensions["mlemu"],
                                       grace=max(0.0, worker.cfg.graceful_timeout - 1.0))
    except RuntimeError as exc:
        worker.log.error("cannot listen on %s:%s: %s", _settings.host, _settings.grpc_port, exc)
        sys.exit(3)  # gunicorn's Arbiter.WORKER_BOOT_ERROR: the master halts


def _stop_grpc(worker: Any) -> None:
    """Refuse new gRPC calls at once; those in flight finish while HTTP drains."""
    if getattr(worker, "mlemu_grpc", None) is not None:
        worker.mlemu_grpc.begin_stop()


def worker_exit(server: Any, worker: Any) -> None:
    """In the worker, as it leaves: gRPC calls in flight get the rest of their grace."""
    if getattr(worker, "mlemu_grpc", None) is not None:
        worker.mlemu_grpc.finish(timeout=worker.mlemu_grpc.grace)


def post_worker_init(worker: Any) -> None:
    """Start the worker's gRPC server (`_start_grpc`); close each gthread worker's listeners
    and stop its gRPC server as soon as it is told to stop (see the docstring), also when it was
    told before it could listen for it (`post_fork`)."""
    _start_grpc(worker)
    if not hasattr(worker, "method_queue"):  # not a gthread worker
        return
    handle_exit = worker.handle_exit

    def handle_exit_and_stop_listening(sig: int, frame: Any) -> None:
        handle_exit(sig, frame)
        worker.method_queue.defer(_stop_listening, worker)
        worker.method_queue.defer(_stop_grpc, worker)

    worker.handle_exit = handle_exit_and_stop_listening
    # Worker.init_signals registered the bound method before this hook ran: register again.
    signal.signal(signal.SIGTERM, handle_exit_and_stop_listening)
    signal.siginterrupt(signal.SIGTERM, False)
    if getattr(worker, "mlemu_stop_early", False):
        handle_exit_and_stop_listening(signal.SIGTERM, None)

#: Each worker's open connections, shared with the workers (deploy/connection_board.py): a busier
#: worker leaves new connections to a less busy one. Slots beyond the worker count absorb
#: replacements and TTIN-added workers.
_board = ConnectionBoard(slots=max(64, 4 * workers))


def pre_fork(server: Any, worker: Any) -> None:
    """Give the worker about to be forked a slot on the connection board, unless the board is
    switched off (MLEMU_WORKER_OFF=board: the worker then accepts as gthread does)."""
    if "board" in _settings.worker_off:
        return
    taken = {slot for w in server.WORKERS.values()
             if (slot := getattr(w, "mlemu_slot", None)) is not None}
    worker.mlemu_board = _board
    worker.mlemu_slot = _board.claim(taken)


def child_exit(server: Any, worker: Any) -> None:
    """A worker died: its slot on the connection board is freed; its live gauges leave the merged
    metrics (prometheus_client multiprocess); its counters stay, so totals never go down."""
    if getattr(worker, "mlemu_slot", None) is not None:
        _board.release(worker.mlemu_slot)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        try:
            multiprocess.mark_process_dead(worker.pid)
        except OSError as exc:  # a read-only or vanished metrics directory: the master goes on
            server.log.warning("could not remove the metrics of dead worker %s: %s", worker.pid,
                               exc)

# Import the app's modules and the frameworks of the bootstrap file's versions here, in the
# master, before the workers fork: they start faster and share that memory. predictors/preload.py
# says why this is fork-safe; the app is only built in each worker (it opens the store).
from app import import_app_modules  # noqa: E402 - needs sys.path above
from predictors.preload import preload, single_threaded_blas  # noqa: E402
from registry.bootstrap import frameworks  # noqa: E402

single_threaded_blas(os.environ)  # first: the app's modules import numpy
import_app_modules()
preload(frameworks(_settings.config_file), os.environ)
