"""mlemu's settings as a table: one line per setting (its Settings field, its variables, the kind
of value it holds, and serve's flag if it has one), and the defaults and choices those lines
name. core/settings.py derives Settings.from_env, to_env and serve's flags from it."""

from __future__ import annotations

from core.envvars import (
    BOOLEAN,
    COUNT,
    DIRECTORY,
    FILE,
    FLOAT,
    INTEGER,
    LIST,
    TEXT,
    Var,
    choice,
    subset,
)

#: AI Platform's online prediction request limit (1.5 MiB).
DEFAULT_MAX_REQUEST_BYTES = 1_572_864
#: gRPC port served beside HTTP by `app.py serve` (0 disables gRPC).
DEFAULT_GRPC_PORT = 8081
#: Message limit of the V2 and grps protocols (REST bodies, gRPC messages): gRPC's default is 4 MiB.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: MLEMU_IAM_MODE: off allows everything, enforce checks every call.
IAM_MODES = ("off", "enforce")
#: MLEMU_LOG_LEVEL: the levels both logging and gunicorn's loglevel know.
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
#: Seconds a client has to send a request's headers, and its whole request, from its first byte
#: (deploy/worker.py). Node.js's http server bounds both the same way (headersTimeout 60 s,
#: requestTimeout 300 s); an emulator's clients are near, so the bounds are tighter.
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_REQUEST_TIMEOUT = 60.0
#: MLEMU_LOG_FORMAT: plain text, or Cloud Logging's structured JSON (observability/logs.py).
LOG_FORMATS = ("text", "json")
#: MLEMU_REQUEST_LOG_SINK: where request-response log rows go (observability/request_log.py).
REQUEST_LOG_SINKS = ("auto", "bigquery", "store")
#: MLEMU_TFSERVING_UNVERSIONED: what a TF Serving route without a version serves.
TFSERVING_UNVERSIONED = ("latest", "default")
#: MLEMU_WORKER_CLASS: mlemu's gunicorn worker (deploy/worker.py) or gunicorn's stock gthread.
WORKER_CLASSES = ("mlemu", "gthread")
#: MLEMU_WORKER_OFF: the optimizations of mlemu's worker that can each be switched off
#: (deploy/tuning.py says what each one does).
WORKER_OPTIMIZATIONS = ("pinning", "board", "socket", "drain")
#: MLEMU_REQUEST_LOG_MAX_BYTES: the store's budget for request-response log rows.
DEFAULT_REQUEST_LOG_MAX_BYTES = 64 * 1024 * 1024


#: Every setting outside Vertex AI's contract (VertexSettings) and MLEMU_X_* (Settings.extra); the
#: flags come first, in the order `serve --help` lists them. Defaults are Settings' own.
SETTINGS = (
    Var("config_file", ("MLEMU_CONFIG",), FILE, "--config",
        "Bootstrap YAML of projects, models and versions to serve."),
    Var("host", ("MLEMU_HOST",), TEXT, "--host",
        "Interface to listen on (default 127.0.0.1; 0.0.0.0 in containers)."),
    # Cloud Run and Knative inject PORT, Vertex AI AIP_HTTP_PORT; MLEMU_PORT wins.
    Var("port", ("MLEMU_PORT", "AIP_HTTP_PORT", "PORT"), INTEGER, "--port",
        "HTTP port (default 8080, or $PORT)."),
    Var("workers", ("MLEMU_WORKERS",), COUNT, "--workers",
        "gunicorn worker processes (default: one per CPU)."),
    Var("threads", ("MLEMU_THREADS",), COUNT, "--threads",
        "Threads per worker (default: 16 in all, at least 4 each)."),
    Var("state_dir", ("MLEMU_STATE_DIR",), DIRECTORY, "--state-dir", "Where state is kept."),
    Var("grpc_port", ("MLEMU_GRPC_PORT",), INTEGER, "--grpc-port",
        "gRPC port for V2 and grps (default 8081, or $MLEMU_GRPC_PORT; 0 disables)."),
    Var("grpc_workers", ("MLEMU_GRPC_WORKERS",), COUNT, "--grpc-workers",
        "gRPC server processes of their own (default: none, every gunicorn worker serves gRPC)."),
    Var("iam_mode", ("MLEMU_IAM_MODE",), choice(*IAM_MODES), "--iam-mode",
        "IAM: off allows everything (default); enforce checks every call."),
    Var("iam_config", ("MLEMU_IAM_CONFIG",), FILE, "--iam-config",
        "IAM config YAML: accounts, tokens, groups, project policies (docs/iam.md)."),
    Var("database_url", ("MLEMU_DATABASE_URL",)),
    Var("storage_emulator_host", ("STORAGE_EMULATOR_HOST",)),
    Var("max_request_bytes", ("MLEMU_MAX_REQUEST_BYTES",), INTEGER),
    Var("default_project", ("MLEMU_PROJECT",)),
    Var("public_url", ("MLEMU_PUBLIC_URL",)),
    Var("xgboost_nthread", ("MLEMU_XGBOOST_NTHREAD",), INTEGER),
    Var("tensorflow_threads", ("MLEMU_TENSORFLOW_THREADS",), INTEGER),
    Var("batch_max_instances", ("MLEMU_BATCH_MAX_INSTANCES",), INTEGER),
    Var("max_loaded_versions", ("MLEMU_MAX_LOADED_VERSIONS",), INTEGER),
    Var("max_loaded_mb", ("MLEMU_MAX_LOADED_MB",), INTEGER),
    Var("ready_versions", ("MLEMU_READY_VERSIONS",), INTEGER),
    Var("log_level", ("MLEMU_LOG_LEVEL",), choice(*LOG_LEVELS)),
    Var("max_message_bytes", ("MLEMU_MAX_MESSAGE_BYTES",), INTEGER),
    Var("grpc_inline_ms", ("MLEMU_GRPC_INLINE_MS",), FLOAT),
    Var("grps_default_model", ("MLEMU_GRPS_MODEL",)),
    Var("beam_runner", ("MLEMU_BEAM_RUNNER",)),
    Var("beam_options", ("MLEMU_BEAM_OPTIONS",)),
    Var("batch_any_framework", ("MLEMU_BATCH_ANY_FRAMEWORK",), BOOLEAN),
    Var("explain_any_framework", ("MLEMU_EXPLAIN_ANY_FRAMEWORK",), BOOLEAN),
    Var("tfserving_unversioned", ("MLEMU_TFSERVING_UNVERSIONED",), choice(*TFSERVING_UNVERSIONED)),
    Var("batch_runner_idle_s", ("MLEMU_BATCH_RUNNER_IDLE_S",), FLOAT),
    Var("header_timeout", ("MLEMU_HEADER_TIMEOUT",), FLOAT),
    Var("request_timeout", ("MLEMU_REQUEST_TIMEOUT",), FLOAT),
    Var("model_roots", ("MLEMU_MODEL_ROOTS",), LIST),
    Var("allowed_buckets", ("MLEMU_ALLOWED_BUCKETS",), LIST),
    Var("data_roots", ("MLEMU_DATA_ROOTS",), LIST),
    Var("log_format", ("MLEMU_LOG_FORMAT",), choice(*LOG_FORMATS)),
    Var("access_log", ("MLEMU_ACCESS_LOG",), BOOLEAN),
    Var("trace_project", ("MLEMU_TRACE_PROJECT", "GOOGLE_CLOUD_PROJECT")),
    Var("metrics", ("MLEMU_METRICS",), BOOLEAN),
    Var("metrics_public", ("MLEMU_METRICS_PUBLIC",), BOOLEAN),
    Var("console", ("MLEMU_CONSOLE",), BOOLEAN),
    Var("request_log_sink", ("MLEMU_REQUEST_LOG_SINK",), choice(*REQUEST_LOG_SINKS)),
    Var("worker_class", ("MLEMU_WORKER_CLASS",), choice(*WORKER_CLASSES)),
    Var("worker_off", ("MLEMU_WORKER_OFF",), subset(*WORKER_OPTIMIZATIONS)),
    Var("request_log_max_bytes", ("MLEMU_REQUEST_LOG_MAX_BYTES",), INTEGER),
    Var("vertex_local_containers", ("MLEMU_VERTEX_LOCAL_CONTAINERS",), BOOLEAN),
    Var("vertex_container_commands", ("MLEMU_VERTEX_CONTAINER_COMMANDS",), LIST),
    Var("vertex_container_start_s", ("MLEMU_VERTEX_CONTAINER_START_S",), FLOAT),
    Var("vertex_container_timeout_s", ("MLEMU_VERTEX_CONTAINER_TIMEOUT_S",), FLOAT),
    Var("vertex_max_containers", ("MLEMU_VERTEX_MAX_CONTAINERS",), INTEGER),
)
