"""Vertex AI's batch prediction output (no Beam here): each prediction beside its instance, each
failure with its instance, as Vertex AI writes them
(https://cloud.google.com/vertex-ai/docs/predictions/get-batch-predictions, "Batch prediction
results": `predictions_*.jsonl` lines `{"instance": ..., "prediction": ...}`, `errors_*.jsonl`
lines `{"instance": ..., "error": {...}}`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from batch.records import Decoder
from core import wirejson


def result_lines(instances: list[Any], predictions: list[Any]) -> str:
    return "\n".join(wirejson.dumps({"instance": i, "prediction": p}).decode()
                     for i, p in zip(instances, predictions, strict=True))


def error_line(instance: Any, message: str) -> str:
    """The instance (None when the record was not valid JSON) and a google.rpc.Status-like error."""
    return wirejson.dumps({"instance": instance,
                           "error": {"status": "INVALID_ARGUMENT", "message": message}}).decode()


def predict_batch(decoder: Decoder, predict: Callable[[list[Any]], list[Any]],
                  batch: list[bytes]) -> tuple[list[str], list[str], int]:
    """(result lines, error lines, predictions made) of one model batch's records; a failed
    batch is retried instance by instance, so only the bad instances are errors."""
    lines: list[str] = []
    instances, failed = decoder.instances(batch)
    bad = [error_line(None, message) for message in failed]
    predicted = 0
    try:
        done = predict(instances) if instances else []
        if done:
            lines.append(result_lines(instances, done))
            predicted = len(done)
    except Exception:  # noqa: BLE001 - find the bad instances one by one
        for instance in instances:
            try:
                lines.append(result_lines([instance], predict([instance])))
                predicted += 1
            except Exception as exc:  # noqa: BLE001 - the message goes to errors_*.jsonl
                message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                bad.append(error_line(instance, f"Prediction failed: {message}"))
    return lines, bad, predicted
