"""Runtime settings: one frozen object, read once from the environment.

This is the only module that reads os.environ. Every variable is documented in the README
("Configuration"); the CLI translates its flags into these variables before starting gunicorn, so
the master, every worker and the gRPC server all see the same settings.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path

#: AI Platform's online prediction request limit (1.5 MiB).
DEFAULT_MAX_REQUEST_BYTES = 1_572_864
#: gRPC port served beside HTTP by `app.py serve` (0 disables gRPC).
DEFAULT_GRPC_PORT = 8081
#: Message limit of the V2 and grps protocols (REST bodies, gRPC messages): gRPC's default is 4 MiB.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


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
    #: Bound on one merged call of adaptive batching; 0 turns batching off (predictors/batching.py).
    batch_max_instances: int = 64
    database_url: str | None = None
    grpc_port: int = DEFAULT_GRPC_PORT
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

    @property
    def store_path(self) -> Path:
        """The embedded SQLite database inside the state directory."""
        return self.state_dir / "mlemu.sqlite3"

    @property
    def gcs_cache_path(self) -> Path:
        """Local copies of gs:// artifacts, keyed by URI and object generation."""
        return self.state_dir / "gcs"

    @property
    def grps_online_path(self) -> Path:
        """grps's online flag (exists: online), shared by every serving process."""
        return self.state_dir / "grps-online"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        defaults = cls()

        def get(name: str) -> str | None:
            value = env.get(name)
            return value if value not in (None, "") else None

        config = get("MLEMU_CONFIG")
        vertex = VertexSettings.from_env(get)
        port = get("MLEMU_PORT") or get("AIP_HTTP_PORT") or get("PORT")
        grpc_port = get("MLEMU_GRPC_PORT")
        return cls(
            state_dir=Path(get("MLEMU_STATE_DIR") or defaults.state_dir),
            config_file=Path(config) if config else None,
            host=get("MLEMU_HOST") or defaults.host,
            # Cloud Run and Knative inject PORT, Vertex AI AIP_HTTP_PORT; MLEMU_PORT wins.
            port=int(port) if port else defaults.port,
            workers=_positive_or_none(get("MLEMU_WORKERS")),
            threads=_positive_or_none(get("MLEMU_THREADS")),
            max_request_bytes=int(get("MLEMU_MAX_REQUEST_BYTES") or defaults.max_request_bytes),
            default_project=get("MLEMU_PROJECT") or defaults.default_project,
            iam_mode=(get("MLEMU_IAM_MODE") or defaults.iam_mode).lower(),
            iam_config=Path(iam) if (iam := get("MLEMU_IAM_CONFIG")) else None,
            xgboost_nthread=int(get("MLEMU_XGBOOST_NTHREAD") or defaults.xgboost_nthread),
            batch_max_instances=int(get("MLEMU_BATCH_MAX_INSTANCES") or defaults.batch_max_instances),
            database_url=get("MLEMU_DATABASE_URL"),
            # Vertex AI routes one HTTP port only: gRPC stays off there unless asked for.
            grpc_port=int(grpc_port) if grpc_port else (0 if vertex else defaults.grpc_port),
            public_url=get("MLEMU_PUBLIC_URL"),
            log_level=get("MLEMU_LOG_LEVEL") or defaults.log_level,
            extra={k: v for k, v in env.items() if k.startswith("MLEMU_X_")},
            max_message_bytes=int(get("MLEMU_MAX_MESSAGE_BYTES") or defaults.max_message_bytes),
            grps_default_model=get("MLEMU_GRPS_MODEL"),
            vertex=vertex,
            storage_emulator_host=get("STORAGE_EMULATOR_HOST"),
        )

    def to_env(self) -> dict[str, str]:
        """The inverse of from_env, for handing settings to child processes (gunicorn workers)."""
        env = {
            "MLEMU_STATE_DIR": str(self.state_dir),
            "MLEMU_HOST": self.host,
            "MLEMU_PORT": str(self.port),
            "MLEMU_MAX_REQUEST_BYTES": str(self.max_request_bytes),
            "MLEMU_PROJECT": self.default_project,
            "MLEMU_IAM_MODE": self.iam_mode,
            "MLEMU_XGBOOST_NTHREAD": str(self.xgboost_nthread),
            "MLEMU_BATCH_MAX_INSTANCES": str(self.batch_max_instances),
            "MLEMU_GRPC_PORT": str(self.grpc_port),
            "MLEMU_LOG_LEVEL": self.log_level,
        }
        if self.config_file is not None:
            env["MLEMU_CONFIG"] = str(self.config_file)
        if self.iam_config is not None:
            env["MLEMU_IAM_CONFIG"] = str(self.iam_config)
        if self.database_url:
            env["MLEMU_DATABASE_URL"] = self.database_url
        if self.public_url:
            env["MLEMU_PUBLIC_URL"] = self.public_url
        env["MLEMU_MAX_MESSAGE_BYTES"] = str(self.max_message_bytes)
        if self.grps_default_model:
            env["MLEMU_GRPS_MODEL"] = self.grps_default_model
        # Unset means "size from the CPUs" (worker_layout): only explicit values are passed on.
        if self.workers is not None:
            env["MLEMU_WORKERS"] = str(self.workers)
        if self.threads is not None:
            env["MLEMU_THREADS"] = str(self.threads)
        if self.vertex is not None:
            env.update(self.vertex.to_env())
        if self.storage_emulator_host:
            env["STORAGE_EMULATOR_HOST"] = self.storage_emulator_host
        env.update(self.extra)
        return env

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def worker_layout(self, cpus: float | None = None) -> tuple[int, int]:
        """(gunicorn workers, threads per worker): explicit settings win, the rest follow the CPUs.

        One process per CPU (rounded up, at most MAX_AUTO_WORKERS: every process holds its own copy
        of each loaded model) gives the Python parts of a request real parallelism; threads per
        process keep about AUTO_TOTAL_THREADS requests in flight per instance (deploy/service.yaml's
        containerConcurrency) and at least MIN_AUTO_THREADS per process for I/O waits. On 2 CPUs
        that is 2 x 8, the layout mlemu used before it sized itself.
        """
        cpus = available_cpus() if cpus is None else cpus
        workers = self.workers or max(1, min(MAX_AUTO_WORKERS, math.ceil(cpus)))
        threads = self.threads or max(MIN_AUTO_THREADS, AUTO_TOTAL_THREADS // workers)
        return workers, threads


#: worker_layout's bounds when MLEMU_WORKERS / MLEMU_THREADS are unset.
MAX_AUTO_WORKERS = 8
AUTO_TOTAL_THREADS = 16
MIN_AUTO_THREADS = 4


def _positive_or_none(value: str | None) -> int | None:
    """An explicit count; unset, empty or 0 mean "size it from the CPUs"."""
    number = int(value) if value else 0
    return number if number > 0 else None


def available_cpus(cgroup_root: Path = Path("/sys/fs/cgroup")) -> float:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota.

    Containers (Cloud Run, Kubernetes limits, `docker run --cpus`) usually limit CPU with a CFS
    quota while os.cpu_count() still reports every host CPU; cgroup v2 exposes it as `cpu.max`
    ("QUOTA PERIOD" or "max PERIOD"), cgroup v1 as cpu.cfs_quota_us / cpu.cfs_period_us.
    """
    try:
        cpus = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        cpus = float(os.cpu_count() or 1)
    quota = _cgroup_quota(cgroup_root)
    return min(cpus, quota) if quota else cpus


def _cgroup_quota(root: Path) -> float | None:
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return int(quota) / int(period) if quota != "max" and int(period) > 0 else None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    except (OSError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class VertexSettings:
    """Vertex AI's custom-container contract: the AIP_* variables Vertex AI sets in a container.

    Serving mode starts when the health route, predict route and storage URI are all set
    (AIP_HTTP_PORT, the port, is read with the other ports above). Spec:
    https://cloud.google.com/vertex-ai/docs/predictions/custom-container-requirements
    """

    health_route: str
    predict_route: str
    storage_uri: str
    deployed_model_id: str | None = None
    #: A custom predictor (module.Class) and its packages for the model, like a version's
    #: predictionClass / packageUris (MLEMU_VERTEX_PREDICTION_CLASS, MLEMU_VERTEX_PACKAGE_URIS).
    prediction_class: str | None = None
    package_uris: tuple[str, ...] = ()
    #: Vertex AI's own variables, passed through unchanged to child processes.
    passthrough: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_env(cls, get: Callable[[str], str | None]) -> VertexSettings | None:
        health, predict, storage = (get("AIP_HEALTH_ROUTE"), get("AIP_PREDICT_ROUTE"),
                                    get("AIP_STORAGE_URI"))
        if not (health and predict and storage):
            return None
        packages = get("MLEMU_VERTEX_PACKAGE_URIS") or ""
        return cls(health_route=health, predict_route=predict, storage_uri=storage,
                   deployed_model_id=get("AIP_DEPLOYED_MODEL_ID"),
                   prediction_class=get("MLEMU_VERTEX_PREDICTION_CLASS"),
                   package_uris=tuple(uri.strip() for uri in packages.split(",") if uri.strip()),
                   passthrough={k: v for k in AIP_PASSTHROUGH if (v := get(k) or "")})

    def to_env(self) -> dict[str, str]:
        env = {**self.passthrough, "AIP_HEALTH_ROUTE": self.health_route,
               "AIP_PREDICT_ROUTE": self.predict_route, "AIP_STORAGE_URI": self.storage_uri}
        if self.deployed_model_id:
            env["AIP_DEPLOYED_MODEL_ID"] = self.deployed_model_id
        if self.prediction_class:
            env["MLEMU_VERTEX_PREDICTION_CLASS"] = self.prediction_class
        if self.package_uris:
            env["MLEMU_VERTEX_PACKAGE_URIS"] = ",".join(self.package_uris)
        return env


#: Other variables Vertex AI sets; mlemu only passes them on (AIP_HTTP_PORT becomes MLEMU_PORT).
AIP_PASSTHROUGH = ("AIP_MODE", "AIP_MODE_VERSION", "AIP_MODEL_NAME", "AIP_ENDPOINT_ID",
                   "AIP_PROJECT_NUMBER")
