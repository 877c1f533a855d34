"""The details Google attaches to a quota error (429 RESOURCE_EXHAUSTED), which a fault rule's
error carries unless the rule gives its own: an ErrorInfo (reason RATE_LIMIT_EXCEEDED, domain
googleapis.com, metadata naming the service and its quota metric), a QuotaFailure and a Help
link. Shapes from google/rpc/error_details.proto and the RATE_LIMIT_EXCEEDED example of
google/api/error_reason.proto (googleapis/googleapis), as Google's 429 answers carry them.

They name the API the request went to: ml v1 (`ml.googleapis.com`, its online prediction
quota), or Vertex AI (`aiplatform.googleapis.com`). Vertex AI's online prediction quota metric is
`aiplatform.googleapis.com/online_prediction_requests` (the quotas page's metric for models
without a base model: https://cloud.google.com/vertex-ai/docs/quotas, "Online prediction
requests", 30,000 per minute per region). Its other methods count against quotas whose metric
names Google does not publish (resource management, LRO submission): their ErrorInfo names the
service only.
"""

from __future__ import annotations

from typing import Any

from core.errors import Code

ML_QUOTA_DOC = "https://cloud.google.com/ai-platform/prediction/docs/quotas"
VERTEX_QUOTA_DOC = "https://cloud.google.com/vertex-ai/docs/quotas"
#: Vertex AI methods that count against its online prediction quota (api/vertex_method_ids.py).
VERTEX_PREDICTION = ("predict", "rawPredict")


def _error_info(api: str, method: str) -> dict[str, str]:
    if api == "vertex":
        metadata = {"service": "aiplatform.googleapis.com"}
        if method in VERTEX_PREDICTION:
            metadata["quota_metric"] = "aiplatform.googleapis.com/online_prediction_requests"
        return metadata
    return {"service": "ml.googleapis.com",
            "quota_metric": "ml.googleapis.com/online_prediction_requests",
            "quota_limit": "OnlinePredictionRequestsPerMinutePerProject"}


def default_details(code: Code, message: str, api: str = "ml",
                    method: str = "") -> list[dict[str, Any]]:
    """The details of a fault with `code` and `message` on a request to `api` ("ml" or
    "vertex"), method id `method`: Google's quota details for RESOURCE_EXHAUSTED, else none."""
    if code is not Code.RESOURCE_EXHAUSTED:
        return []
    vertex = api == "vertex"
    return [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED",
         "domain": "googleapis.com", "metadata": _error_info(api, method)},
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"subject": "project", "description": message}]},
        {"@type": "type.googleapis.com/google.rpc.Help",
         "links": [{"description": "Vertex AI quotas" if vertex else
                    "AI Platform Prediction quotas",
                    "url": VERTEX_QUOTA_DOC if vertex else ML_QUOTA_DOC}]},
    ]
