"""gunicorn settings for mlemu, read from the same environment as settings.py.

Workers are threads-in-processes (gthread): model calls release the GIL for most of their time,
and processes give the rest of the request path real parallelism. The app is not preloaded: each
worker opens the store after the fork. The master imports only the thread-free scikit-learn and
XGBoost modules the bootstrap file needs (predictors/preload.py); OpenMP, BLAS and TensorFlow
thread pools start in the workers, never before a fork.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from settings import Settings

_settings = Settings.from_env()

bind = f"{_settings.host}:{_settings.port}"
workers = _settings.workers
threads = _settings.threads
worker_class = "gthread"
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
proc_name = "mlemu"

# Import the frameworks of the bootstrap file's versions here, in the master, before the workers
# fork: they start faster and share that memory. predictors/preload.py says why this is fork-safe.
from predictors.preload import preload  # noqa: E402 - needs sys.path above
from registry.bootstrap import frameworks  # noqa: E402

preload(frameworks(_settings.config_file), os.environ)
