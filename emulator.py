"""The Emulator: one object holding an instance's settings, store, deployments and policy.

`create_app` (and the gRPC server) build one with `build_emulator(settings)` and pass it to every
use case; nothing below the adapters reaches for globals. All mutable state hangs off it: the
store, the deployments (loaded predictors, their batchers and load options), the task runner
(with the operation handlers registered here) and the lastUseTime throttle, so two emulators
built in one process share nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path
from typing import Any

import auth
from controlplane import job_work, operation_work
from errors import ApiError
from observability import logs
from observability.metrics import Instruments
from observability.request_log import RequestLogger
from predictors.base import PredictorOptions
from registry import artifacts, bootstrap, names
from registry.deployments import Deployments
from registry.gcs import GcsCache
from registry.resources import Version
from registry.store import Store, open_store
from registry.tasks import TaskRunner
from settings import Settings

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


@dataclasses.dataclass
class Emulator:
    settings: Settings
    store: Store
    deployments: Deployments
    #: The IAM configuration (auth.IamConfig): identities, groups, project policies.
    policy: auth.IamConfig = dataclasses.field(default_factory=auth.IamConfig)
    started_at: float = dataclasses.field(default_factory=time.time)
    #: Version names declared by the bootstrap file (readiness waits for these to load).
    bootstrap_versions: list[str] = dataclasses.field(default_factory=list)
    warmed: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: Version name -> monotonic time this emulator last wrote its lastUseTime (dataplane.py).
    last_use: dict[str, float] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    #: Where versions.create may take model files from (MLEMU_MODEL_ROOTS, MLEMU_ALLOWED_BUCKETS).
    sources: artifacts.Sources = dataclasses.field(default_factory=artifacts.Sources)
    #: Where batch prediction jobs may read inputs and write outputs (MLEMU_DATA_ROOTS).
    data_sources: artifacts.Sources = dataclasses.field(default_factory=artifacts.Sources)
    #: Runs long-running operations off the request thread and adopts orphaned ones.
    tasks: TaskRunner = dataclasses.field(init=False, repr=False, compare=False)
    #: What metrics are recorded with (observability/metrics.py); None when metrics are off.
    instruments: Instruments | None = None
    #: Request-response logging of versions with a requestLoggingConfig.
    request_log: RequestLogger = dataclasses.field(init=False, repr=False, compare=False)
    #: (store change token, versions held) at the last prune_deployments (on_tick's thread only).
    pruned_at: tuple[object, frozenset[tuple[str, str]]] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False)

    def warm_up(self) -> None:
        """Load every READY bootstrap version so the first request does not pay for it.

        A version whose model cannot be loaded is marked FAILED with the reason, as a
        versions.create would have done, so it reports why it does not serve.
        """
        try:
            for name in self.bootstrap_versions:
                version = self.store.get_version(name)
                if version is None or version.state != "READY":
                    continue
                try:
                    predictor = self.deployments.get(version)
                except ApiError as exc:
                    log.warning("could not load %s: %s", name, exc.message)
                    self._mark_failed(version, exc.message)
                else:
                    if not version.framework and not version.prediction_class:
                        self._set_framework(version, predictor.framework)
        finally:
            self.warmed.set()

    def _mark_failed(self, version: Version, message: str) -> None:
        def fail(current: Version) -> bool:
            if current.state != "READY":
                return False
            current.state, current.error_message = "FAILED", message
            return True

        self.store.update_version(version, fail)

    def _set_framework(self, version: Version, framework: str) -> None:
        """Record the framework a load detected (gs:// bootstrap versions are not inspected
        before warm-up downloads them)."""
        def record(current: Version) -> bool:
            if current.framework:
                return False
            current.framework = framework
            return True

        self.store.update_version(version, record)

    def prune_deployments(self) -> None:
        """Free the predictors of versions another process or instance deleted or re-created.
        Skipped while neither the store nor what this process holds changed since the last
        prune: it reads every held version from the store (200 queries with 200 models)."""
        token = self.store.change_token()  # before the reads, as registry/lookup.py takes it
        held = self.deployments.incarnations()
        if token is not None and self.pruned_at == (token, held):
            return

        def current_uid(name: str) -> str | None:
            version = self.store.get_version(name)
            return version.uid if version is not None else None

        for name in self.deployments.prune(current_uid):
            log.info("unloaded %s: deleted or re-created elsewhere", name)
        self.pruned_at = (token, held)

    def store_problem(self) -> str | None:
        """Why the store cannot be used now (a damaged, read-only or unreachable store), if so."""
        try:
            self.store.check()
        except ApiError as exc:
            return exc.message
        return None

    def on_tick(self) -> None:
        """The task runner's periodic call (every few seconds, in every process)."""
        self.prune_deployments()
        if self.instruments is not None:
            self.instruments.update_process(min_interval_s=5.0)

    def is_ready(self) -> bool:
        """Bootstrap models loaded and the store usable: every readiness probe asks this."""
        return self.warmed.is_set() and self.store_problem() is None


#: Where Vertex AI's model (AIP_STORAGE_URI) is registered: model `vertex`, version `v1` of the
#: default project, so the other protocols (ml v1, V2, TF Serving) serve it under that name too.
VERTEX_MODEL, VERTEX_VERSION = "vertex", "v1"


def vertex_version_name(settings: Settings) -> str:
    return names.version_name(settings.default_project, VERTEX_MODEL, VERTEX_VERSION)


def register_vertex_model(store: Store, settings: Settings) -> str:
    """Declare the AIP_STORAGE_URI model as a bootstrap version (framework detected from its
    files, like a versions.create without `framework`); returns the version name. Its URI goes
    through registry.artifacts.resolve_uri like any deploymentUri, so whatever schemes that
    resolves (local paths, file://, gs://) work here too."""
    vertex = settings.vertex
    assert vertex is not None
    spec: dict[str, Any] = {"deploymentUri": vertex.storage_uri}
    if vertex.prediction_class:
        spec.update(predictionClass=vertex.prediction_class, packageUris=list(vertex.package_uris))
    data = {"projects": {settings.default_project: {"models": {VERTEX_MODEL: {
        "description": "The model Vertex AI deployed to this container (AIP_STORAGE_URI).",
        "versions": {VERTEX_VERSION: spec},
    }}}}}
    bootstrap.apply_data(store, data, Path.cwd(), "AIP_STORAGE_URI")
    return vertex_version_name(settings)


def build_emulator(settings: Settings, *, warm: bool = True) -> Emulator:
    iam = auth.load_config(settings)  # a bad IAM config stops the start, before any state
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.database_url, settings.state_dir)
    gcs = GcsCache(settings.gcs_cache_path, settings.storage_emulator_host)
    options = PredictorOptions(xgboost_nthread=settings.xgboost_nthread,
                               tensorflow_threads=settings.tensorflow_threads)
    instruments = Instruments() if settings.metrics else None
    deployments = Deployments(settings.state_dir / "packages", gcs=gcs, options=options,
                              max_loaded=settings.max_loaded_versions, instruments=instruments)
    emu = Emulator(settings, store, deployments, iam, instruments=instruments)
    emu.request_log = RequestLogger(store, settings.request_log_sink, instruments=instruments)
    settings.models_root.mkdir(exist_ok=True)
    emu.sources = artifacts.Sources.for_server(settings.local_model_roots(), settings.allowed_buckets)
    emu.data_sources = artifacts.Sources.for_server(
        settings.local_data_roots(), None,
        local_rule="batch prediction data must be under a directory this server keeps job data "
                   "in (MLEMU_DATA_ROOTS)")
    if settings.config_file is not None:
        emu.bootstrap_versions = bootstrap.apply(store, settings.config_file)
    if settings.vertex is not None:
        emu.bootstrap_versions.append(register_vertex_model(store, settings))
    # Starting the runner also recovers operations a dead process left unfinished.
    emu.tasks = TaskRunner(store, emu, on_tick=emu.on_tick, long_threads=JOB_THREADS)
    operation_work.register(emu.tasks)  # before start: the first tick adopts orphaned operations
    job_work.register(emu.tasks)  # batch prediction jobs, on the runner's long-task threads
    emu.tasks.start()
    if warm:
        threading.Thread(target=emu.warm_up, name="mlemu-warm-up", daemon=True).start()
    else:
        emu.warmed.set()
    return emu
