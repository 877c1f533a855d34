"""Runtime settings: one frozen object, read once from the environment.

This is the only module that reads os.environ. Every variable is documented in the README
("Configuration"); the CLI translates its flags into these variables before starting gunicorn, so
the master, every worker and the gRPC server all see the same settings.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
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
    workers: int = 2
    threads: int = 8
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

    @property
    def store_path(self) -> Path:
        """The embedded SQLite database inside the state directory."""
        return self.state_dir / "mlemu.sqlite3"

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
        return cls(
            state_dir=Path(get("MLEMU_STATE_DIR") or defaults.state_dir),
            config_file=Path(config) if config else None,
            host=get("MLEMU_HOST") or defaults.host,
            # Cloud Run and Knative inject PORT; MLEMU_PORT wins when both are set.
            port=int(get("MLEMU_PORT") or get("PORT") or defaults.port),
            workers=int(get("MLEMU_WORKERS") or defaults.workers),
            threads=int(get("MLEMU_THREADS") or defaults.threads),
            max_request_bytes=int(get("MLEMU_MAX_REQUEST_BYTES") or defaults.max_request_bytes),
            default_project=get("MLEMU_PROJECT") or defaults.default_project,
            iam_mode=(get("MLEMU_IAM_MODE") or defaults.iam_mode).lower(),
            iam_config=Path(iam) if (iam := get("MLEMU_IAM_CONFIG")) else None,
            xgboost_nthread=int(get("MLEMU_XGBOOST_NTHREAD") or defaults.xgboost_nthread),
            batch_max_instances=int(get("MLEMU_BATCH_MAX_INSTANCES") or defaults.batch_max_instances),
            database_url=get("MLEMU_DATABASE_URL"),
            grpc_port=int(get("MLEMU_GRPC_PORT") or defaults.grpc_port),
            public_url=get("MLEMU_PUBLIC_URL"),
            log_level=get("MLEMU_LOG_LEVEL") or defaults.log_level,
            extra={k: v for k, v in env.items() if k.startswith("MLEMU_X_")},
            max_message_bytes=int(get("MLEMU_MAX_MESSAGE_BYTES") or defaults.max_message_bytes),
            grps_default_model=get("MLEMU_GRPS_MODEL"),
        )

    def to_env(self) -> dict[str, str]:
        """The inverse of from_env, for handing settings to child processes (gunicorn workers)."""
        env = {
            "MLEMU_STATE_DIR": str(self.state_dir),
            "MLEMU_HOST": self.host,
            "MLEMU_PORT": str(self.port),
            "MLEMU_WORKERS": str(self.workers),
            "MLEMU_THREADS": str(self.threads),
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
        env.update(self.extra)
        return env

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
