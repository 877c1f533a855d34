"""Runtime settings: one frozen object, read once from the environment.

This is the only module that reads os.environ. Each setting is declared once, as one line of
SETTINGS: its Settings field, its variables, the kind of value it holds (envvars.py) and, for the
few `app.py serve` takes on the command line, its flag. from_env, to_env and serve's flags are all
derived from that table. Every variable is documented (a test keeps the two in step); the CLI
translates its flags into these variables, so every process sees the same settings.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path

from core.container_settings import VertexSettings
from core.envvars import (
    SettingsError,
    read,
    write,
)
from core.setting_table import (
    DEFAULT_GRPC_PORT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_REQUEST_LOG_MAX_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
    SETTINGS,
)
from core.sizing import (
    AUTO_TOTAL_THREADS,
    MAX_AUTO_WORKERS,
    MEMORY_PER_THREAD,
    MIN_AUTO_THREADS,
    available_cpus,
    available_memory,
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything configurable about one emulator instance."""

    state_dir: Path = Path("mlemu-state")
    config_file: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    #: gunicorn processes and threads per process; None sizes them from the CPUs (worker_layout).
    workers: int | None = None
    threads: int | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    default_project: str = "mlemu"
    iam_mode: str = "off"
    #: IAM config YAML (service accounts, ID tokens, static tokens, groups, project policies).
    iam_config: Path | None = None
    #: OpenMP threads one XGBoost predict call may use; see predictors/xgboost.py for the policy.
    xgboost_nthread: int = 1
    #: Threads of one TensorFlow session call; 1 runs it in the request's thread (predictors/
    #: tensorflow.py, `session_config`).
    tensorflow_threads: int = 1
    #: Bound on one merged call of adaptive batching; 0 turns batching off (predictors/batching.py).
    batch_max_instances: int = 64
    #: Most versions each serving process keeps loaded; beyond it the least recently used one is
    #: unloaded and reloads on demand (registry/deployments.py). 0: no bound. 256 holds 200 small
    #: scikit-learn versions while bounding a laptop's memory when models are large.
    max_loaded_versions: int = 256
    #: Most estimated MiB of models each serving process keeps loaded, with what versions it
    #: loaded before still hold (registry/footprint.py); beyond it the least recently used
    #: versions are unloaded. 0: no bound (the count above bounds memory; docs/performance.md
    #: says why this is off by default).
    max_loaded_mb: int = 0
    #: Bootstrap versions each serving process loads before it reports ready; the rest load in
    #: the background while the caps leave room, and on demand (emulator warm_up).
    ready_versions: int = 32
    database_url: str | None = None
    grpc_port: int = DEFAULT_GRPC_PORT
    #: gRPC server processes of their own beside gunicorn on grpc_port (SO_REUSEPORT); None:
    #: gRPC is served inside every gunicorn worker (grpcserve/in_worker.py).
    grpc_workers: int | None = None
    #: A unary gRPC call runs on the server's event loop while that method's recent calls to
    #: its model took at most this many milliseconds; 0: always in the thread pool
    #: (grpcserve/dispatch.py).
    grpc_inline_ms: float = 1.0
    public_url: str | None = None
    log_level: str = "info"
    extra: Mapping[str, str] = dataclasses.field(default_factory=dict)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: grps's default model (`name` or `name-version`) for requests that select none.
    grps_default_model: str | None = None
    #: Vertex AI custom-container contract (AIP_* variables); None outside Vertex AI.
    vertex: VertexSettings | None = None
    #: Cloud Storage emulator (STORAGE_EMULATOR_HOST, the variable google-cloud-storage and
    #: gcloud use) for gs:// URIs; None talks to Cloud Storage itself.
    storage_emulator_host: str | None = None
    #: Batch prediction jobs: the Beam runner and extra pipeline options (shell-quoted) they run
    #: with (batch/pipeline.py); DirectRunner runs them on this machine.
    beam_runner: str = "DirectRunner"
    beam_options: str = ""
    #: Batch prediction of SCIKIT_LEARN, XGBOOST and custom models (the real service ran
    #: TensorFlow models only); off refuses them as the service did.
    batch_any_framework: bool = False
    #: ml v1 :explain with sampled Shapley on SCIKIT_LEARN, XGBOOST and custom models (the real
    #: service explained TensorFlow models only); off refuses them as the service did.
    explain_any_framework: bool = False
    #: TF Serving routes without a version: "latest" serves the highest numbered READY version
    #: (TF Serving's Latest); "default" the ml v1 default version, as AI Platform's :predict.
    tfserving_unversioned: str = "latest"
    #: Seconds a batch job runner (Beam and a framework imported, batch/runner.py) stays warm
    #: after its last job; 0: a fresh runner per job.
    batch_runner_idle_s: float = 300.0
    #: Time limits for receiving a request (headers; headers and body), in seconds.
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    #: Directories versions.create may take local deploymentUri / packageUris from; None: the
    #: defaults of `local_model_roots`.
    model_roots: tuple[str, ...] | None = None
    #: Cloud Storage buckets versions.create may take gs:// URIs from; None: any bucket.
    allowed_buckets: tuple[str, ...] | None = None
    #: Directories batch prediction jobs may read inputPaths from and write outputPath to; None:
    #: the defaults of `local_data_roots`.
    data_roots: tuple[str, ...] | None = None
    #: "text" (default) or "json": Cloud Logging's structured lines on stdout (observability/logs.py).
    log_format: str = "text"
    #: One httpRequest log entry per request; None: on exactly when log_format is json.
    access_log: bool | None = None
    #: The Google Cloud project of log lines' trace field; None: the default project.
    trace_project: str | None = None
    #: Prometheus metrics recorded and served at GET /metrics (observability/metrics.py).
    metrics: bool = True
    #: GET /metrics without credentials when IAM is enforced (always open with IAM off).
    metrics_public: bool = False
    #: The web console at /console/ (console/); off answers 404 there.
    console: bool = True
    #: auto (BigQuery with Google credentials, else the store), bigquery or store.
    request_log_sink: str = "auto"
    #: "mlemu" (deploy/worker.py, on the gunicorn versions it was tested with) or "gthread"
    #: (gunicorn's own worker, on any gunicorn, without mlemu's request deadlines and JSON errors).
    worker_class: str = "mlemu"
    #: Optimizations of mlemu's worker switched off (deploy/tuning.py), for measuring each one.
    worker_off: tuple[str, ...] = ()
    #: Bytes of request-response log rows the store keeps in all; the oldest go first.
    request_log_max_bytes: int = DEFAULT_REQUEST_LOG_MAX_BYTES
    #: Vertex AI models with a custom image and a containerSpec.command run that command as a
    #: local process (predictors/container.py); off refuses them with FAILED_PRECONDITION.
    vertex_local_containers: bool = False
    #: Executables containerSpec.command[0] may name; required with IAM enforced.
    vertex_container_commands: tuple[str, ...] | None = None
    #: Seconds a started container has to answer 200 on its health route.
    vertex_container_start_s: float = 120.0
    #: Seconds one call to a container's predict route may take.
    vertex_container_timeout_s: float = 60.0
    #: Container processes each serving process runs at most.
    vertex_max_containers: int = 4

    @property
    def metrics_dir(self) -> Path:
        """prometheus_client's multiprocess files (emptied when `app.py serve` starts)."""
        return self.state_dir / "metrics"

    @property
    def access_log_on(self) -> bool:
        return self.log_format == "json" if self.access_log is None else self.access_log

    @property
    def store_path(self) -> Path:
        """The embedded SQLite database inside the state directory."""
        return self.state_dir / "mlemu.sqlite3"

    @property
    def jobs_path(self) -> Path:
        """Working directories of batch prediction runs (spec, progress, pipeline log)."""
        return self.state_dir / "jobs"

    @property
    def gcs_cache_path(self) -> Path:
        """Local copies of gs:// artifacts, keyed by URI and object generation."""
        return self.state_dir / "gcs"

    @property
    def models_root(self) -> Path:
        """The state directory's `models/`, a model root by default (local_model_roots)."""
        return self.state_dir / "models"

    def local_model_roots(self) -> tuple[Path, ...] | None:
        """Where versions.create may take local model files from: MLEMU_MODEL_ROOTS when set;
        else, in IAM mode `enforce`, the bootstrap file's directory and the state directory's
        `models/`; else (mode `off`, where every caller may do anything anyway) anywhere."""
        if self.model_roots is not None:
            return tuple(Path(root) for root in self.model_roots)
        if self.iam_mode != "enforce":
            return None
        roots = [self.models_root]
        if self.config_file is not None:
            roots.append(self.config_file.resolve().parent)
        return tuple(roots)

    @property
    def data_root(self) -> Path:
        """The state directory's `data/`, the default data root in IAM mode `enforce`."""
        return self.state_dir / "data"

    def local_data_roots(self) -> tuple[Path, ...] | None:
        """Where batch prediction jobs may read and write local files: MLEMU_DATA_ROOTS when set;
        else, in IAM mode `enforce`, the state directory's `data/`; else (mode `off`) anywhere.
        A job reads its inputs and writes its outputs as the server's user, so whoever may create
        a job must not be able to name any file the server can reach."""
        if self.data_roots is not None:
            return tuple(Path(root) for root in self.data_roots)
        if self.iam_mode != "enforce":
            return None
        return (self.data_root,)

    @property
    def grps_online_path(self) -> Path:
        """grps's online flag (exists: online), shared by every serving process."""
        return self.state_dir / "grps-online"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings `environ` (default: os.environ) gives; SettingsError names a bad variable."""
        env = os.environ if environ is None else environ
        values = read(SETTINGS, env.get)  # an empty variable counts as unset
        vertex = VertexSettings.from_env(env.get)
        if vertex is not None:  # Vertex AI routes one HTTP port only: gRPC stays off unless asked
            values.setdefault("grpc_port", 0)
        if (values.get("vertex_local_containers") and values.get("iam_mode") == "enforce"
                and not values.get("vertex_container_commands")):
            # Running a command a model names is running code: with IAM enforced, only the
            # executables the operator lists.
            raise SettingsError(
                "MLEMU_VERTEX_LOCAL_CONTAINERS: with MLEMU_IAM_MODE=enforce, also set "
                "MLEMU_VERTEX_CONTAINER_COMMANDS to the executables containers may run")
        return cls(**values, vertex=vertex,
                   extra={k: v for k, v in env.items() if k.startswith("MLEMU_X_")})

    def to_env(self) -> dict[str, str]:
        """The inverse of from_env, for handing settings to child processes (gunicorn workers).

        Unset (None) settings are left out: workers and threads then size from the CPUs there too.
        """
        env = write(SETTINGS, self)
        if self.vertex is not None:
            env.update(self.vertex.to_env())
        env.update(self.extra)
        return env

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def worker_layout(self, cpus: float | None = None,
                      memory: int | None = None) -> tuple[int, int]:
        """(gunicorn workers, threads per worker): explicit settings win, the rest follow the CPUs
        and the memory.

        One process per CPU (rounded up, at most MAX_AUTO_WORKERS: every process holds its own copy of
        each loaded model) gives the Python parts of a request real parallelism. Threads per
        process keep up to AUTO_TOTAL_THREADS requests in flight per instance
        (deploy/service.yaml's containerConcurrency), at least MIN_AUTO_THREADS per process:
        adaptive batching can only merge requests that are in flight together, and a busy
        keep-alive connection keeps its thread only while the worker has a thread for each of its
        connections (deploy/worker.py), so under many concurrent small requests more threads mean
        larger merged calls and fewer hand-offs (bench/RESULTS.md compares 2 x 32 with 2 x 8
        threads). Idle threads cost nothing (gunicorn starts them as connections need them); a
        busy one holds at most one request body (MLEMU_MAX_REQUEST_BYTES) and what it decodes to,
        so the total is also held to MEMORY_PER_THREAD of the memory the instance may use. On 2
        CPUs with 2 GiB or more that is 2 x 32.
        """
        cpus = available_cpus() if cpus is None else cpus
        memory = available_memory() if memory is None else memory
        workers = self.workers or max(1, min(MAX_AUTO_WORKERS, math.ceil(cpus)))
        total = min(AUTO_TOTAL_THREADS, memory // MEMORY_PER_THREAD)
        threads = self.threads or max(MIN_AUTO_THREADS, total // workers)
        return workers, threads

    def grpc_in_workers(self) -> bool:
        """Whether each gunicorn worker serves gRPC itself (grpcserve/in_worker.py): a gRPC port
        and no MLEMU_GRPC_WORKERS. Sharing the worker's process shares its loaded models and
        batchers with HTTP, so a model is loaded once per process."""
        return bool(self.grpc_port) and self.grpc_workers is None

    def grpc_processes(self) -> int:
        """gRPC server processes of their own that `app.py serve` starts beside gunicorn:
        MLEMU_GRPC_WORKERS (the separate layout: each loads every model again), else none."""
        return (self.grpc_workers or 0) if self.grpc_port else 0

    def grpc_threads(self) -> int:
        """Threads running one process's gRPC calls (grpcserve/server.py): MLEMU_THREADS when set
        (at least MIN_AUTO_THREADS), else MIN_AUTO_THREADS. grpc.aio receives every message in its
        event loop before a thread gets the call, so threads are for model compute only, and
        fewer of them leave more of the GIL to the loop (bench/NOTES.md, "Figures kept out of the
        code": 4 threads against 8 per gRPC process). Batching merges the calls
        in flight together, up to this many per process."""
        return max(MIN_AUTO_THREADS, self.threads or 0)
