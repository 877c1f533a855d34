"""gunicorn settings for mlemu, read from the same environment as settings.py.

Workers are threads-in-processes (gthread): model calls release the GIL for most of their time,
and processes give the rest of the request path real parallelism. The app is not preloaded: each
worker opens the store and imports its frameworks after the fork (OpenMP and BLAS thread pools
must not be forked).
"""

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
