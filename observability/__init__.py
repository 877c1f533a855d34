"""Observability: Prometheus metrics, Cloud Logging JSON logs and request-response logging.

One package, reached from the few places every request passes through (DESIGN.md, "Where the
next capabilities go"): the HTTP middleware and the gRPC handlers' wrapper around every protocol
(`http.py`, `grpc.py`), `dataplane.resolve` (which model and version a request reached),
the deployments cache (every model load and model call, `instrument.py`), adaptive batching and
the task runner. Modules:

  context.py      the per-request context (trace, caller, model, version) logs and metrics read
  metrics.py      metric definitions (one set per Emulator), cached label children
  tally.py        lock-free per-thread recording, flushed into prometheus_client each second
  exposition.py   the Prometheus text for GET /metrics and the grps monitoring page
  http.py         WSGI middleware: request metrics and the httpRequest access log
  grpc.py         each gRPC method's handler, observed: the same for V2 and grps over gRPC
  instrument.py   model-call timing and attribution of a predictor's own print/logging
  logs.py         text or Cloud Logging JSON on stdout, TensorFlow/absl noise
  request_log.py  AI Platform request-response logging (BigQuery, or a table in the store)

Nothing here imports Flask, TensorFlow or the registry at runtime.
"""
