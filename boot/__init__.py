"""The composition root: builds an Emulator from Settings and wires it (the store, the task
runner with the operation and job handlers, the bootstrap file, the Vertex AI container model),
and the process-wide logging and native-library environment every mlemu process starts with.

`app.create_app` and the gRPC server call `build_emulator`; nothing below the adapters does.
"""

from __future__ import annotations

import logging
import threading

import auth
from controlplane import job_work, operation_work
from controlplane.vertex import batch_work as vertex_batch_work
from controlplane.vertex import deferred_work as vertex_deferred_work
from controls import Controls
from core.errors import Unavailable
from core.settings import Settings
from emulator import Emulator
from emulator.vertex_container import register_vertex_model
from observability import logs
from observability.metrics import Instruments
from observability.request_log import RequestLogger
from predictors.base import PredictorOptions
from predictors.container import ContainerHost, ContainerLimits
from registry import artifacts, bootstrap
from registry.deployments import Deployments
from registry.gcs import GcsCache
from registry.store import Store, open_store
from registry.tasks import TaskRunner

log = logging.getLogger("mlemu")
#: Batch prediction jobs one server process runs at once (more wait in QUEUED).
JOB_THREADS = 4

#: Environment for every process `app.py` starts (set before any TensorFlow import; a value the
#: user set wins): TensorFlow's C++ INFO/WARNING start-up lines (CPU features, MLIR) off, and
#: oneDNN's "custom operations are on" banner, which only TF_ENABLE_ONEDNN_OPTS=0 silences
#: (TF 2.21 prints it before reading TF_CPP_MIN_LOG_LEVEL). TF Serving's standard builds do not
#: use oneDNN's custom operations either, so its numerics are what this matches.
QUIET_NATIVE_LOGS = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}


def configure_logging(settings: Settings) -> None:
    """One log format for every mlemu process: text, or Cloud Logging JSON
    (observability/logs.py, which also quiets TensorFlow's Python logger below debug)."""
    logs.configure(settings.log_level, settings.log_format,
                   settings.trace_project or settings.default_project)



def _apply_bootstrap(store: Store, settings: Settings) -> list[str]:
    """The bootstrap file applied; when the store cannot take writes now (a full or read-only
    disk) what an earlier process applied is served as it is: a worker that replaces a dead
    one on a full disk must still boot and serve, not halt the server."""
    assert settings.config_file is not None
    try:
        return bootstrap.apply(store, settings.config_file)
    except Unavailable as exc:
        try:  # readable? then serve what is there; if not, the start fails as before
            versions = [name for name in bootstrap.declared(settings.config_file)
                        if store.get_version(name) is not None]
        except Unavailable:
            raise exc from None
        log.warning("bootstrap file not applied (%s); serving the store as it is", exc.message)
        return versions


def build_emulator(settings: Settings, *, warm: bool = True) -> Emulator:
    iam = auth.load_config(settings)  # a bad IAM config stops the start, before any state
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.database_url, settings.state_dir)
    gcs = GcsCache(settings.gcs_cache_path, settings.storage_emulator_host)
    options = PredictorOptions(xgboost_nthread=settings.xgboost_nthread,
                               tensorflow_threads=settings.tensorflow_threads)
    instruments = Instruments() if settings.metrics else None
    containers = ContainerHost(ContainerLimits(
        enabled=settings.vertex_local_containers, commands=settings.vertex_container_commands,
        start_s=settings.vertex_container_start_s, timeout_s=settings.vertex_container_timeout_s,
        max_processes=settings.vertex_max_containers,
        max_response_bytes=settings.max_message_bytes, enforce=settings.iam_mode == "enforce"))
    deployments = Deployments(settings.state_dir / "packages", gcs=gcs, options=options,
                              max_loaded=settings.max_loaded_versions, instruments=instruments,
                              containers=containers, max_bytes=settings.max_loaded_mb << 20)
    emu = Emulator(settings, store, deployments, iam, instruments=instruments)
    emu.request_log = RequestLogger(store, settings.request_log_sink, instruments=instruments,
                                    max_bytes=settings.request_log_max_bytes)
    emu.controls = Controls(settings.state_dir)
    settings.models_root.mkdir(exist_ok=True)
    emu.sources = artifacts.Sources.for_server(settings.local_model_roots(), settings.allowed_buckets)
    emu.data_sources = artifacts.Sources.for_server(
        settings.local_data_roots(), None,
        local_rule="batch prediction data must be under a directory this server keeps job data "
                   "in (MLEMU_DATA_ROOTS)")
    if settings.config_file is not None:
        emu.bootstrap_versions = _apply_bootstrap(store, settings)
    if settings.vertex is not None:
        # First: the model a Vertex AI custom container serves is one readiness waits for.
        emu.bootstrap_versions.insert(0, register_vertex_model(store, settings))
    # Starting the runner also recovers operations a dead process left unfinished.
    emu.tasks = TaskRunner(store, emu, on_tick=emu.on_tick, long_threads=JOB_THREADS)
    emu.tasks.hold = emu.controls.timing.hold  # timing rules (controls/timing.py) gate every task type
    operation_work.register(emu.tasks)  # before start: the first tick adopts orphaned operations
    job_work.register(emu.tasks)  # batch prediction jobs, on the runner's long-task threads
    vertex_batch_work.register(emu.tasks)  # Vertex AI's batch prediction jobs, likewise
    vertex_deferred_work.register(emu.tasks)  # upload and deploy, when a timing rule holds them
    emu.tasks.start()
    if warm:
        threading.Thread(target=emu.warm_up, name="mlemu-warm-up", daemon=True).start()
    else:
        emu.remember_baseline()
        emu.warmed.set()
    return emu
