"""The data plane: every serving protocol's one way to a model.

authorize -> resolve -> batch -> model call (instrumented) -> bookkeeping -> request log, the
same for ml v1 `:predict`, Vertex AI, TF Serving REST, V2 (REST and gRPC) and grps (HTTP and
gRPC), so permissions, version resolution, adaptive batching, metrics, lastUseTime,
request-response logging and errors behave the same whichever wire format a request came in on.
The protocol adapters (protocols/) only decode their request and encode the answer.

- resolution: `admit` (the predict permission, before the body is read), `resolve` (the
  permission, then the READY version and its loaded predictor: the one point every request
  passes right after its version is known), `predict_permission`, `check_parameters`;
- serving: `predict` (instances -> predictions, resolution included), `predict_resolved` (the
  same once a surface resolved what serves it: Vertex AI's endpoint routing) and `serve` (resolution
  alone -> a `Served`, whose `predict` and `predict_tensors` run the model the same way, for
  adapters that decode against the model's signature);
- bookkeeping: lastUseTime and the request log, after the model answered;
- explanation: `explain`, the `:explain` use case.
"""

from dataplane.bookkeeping import LAST_USE_INTERVAL_S
from dataplane.explanation import explain
from dataplane.resolution import admit, check_parameters, predict_permission, resolve
from dataplane.serving import Served, predict, predict_resolved, run_instances, serve

__all__ = ["LAST_USE_INTERVAL_S", "Served", "admit", "check_parameters", "explain",
           "predict", "predict_permission", "predict_resolved", "resolve", "run_instances",
           "serve"]
