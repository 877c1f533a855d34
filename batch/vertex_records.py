"""Vertex AI's batch prediction output (no Beam here): each prediction beside its instance, each
failure with its instance, as Vertex AI writes them
(https://cloud.google.com/vertex-ai/docs/predictions/get-batch-predictions, "Batch prediction
results": `predictions_*.jsonl` lines `{"instance": ..., "prediction": ...}`, `errors_*.jsonl`
lines `{"instance": ..., "error": {...}}`). With an instanceConfig `keyField` a line holds `key`
in place of `instance` (batch/vertex_instances.py).

The files' names are the same whichever runner writes them: `predictions_NNNNN.jsonl` and
`errors_NNNNN.jsonl` in the job's output directory (`shard_name`; batch/pipeline.py gives Beam's
WriteToText the same parts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from batch.records import Decoder
from batch.vertex_instances import InstanceConfig
from core import wirejson

#: The output files' names: PREFIX + "_" + five-digit shard number + SUFFIX.
PREDICTIONS = "predictions"
ERRORS = "errors"
SHARD_TEMPLATE = "_SSSSS"  # Beam's WriteToText spelling of "_" + the number
SUFFIX = ".jsonl"
NO_CONFIG = InstanceConfig()


def shard_name(prefix: str, index: int) -> str:
    """The file name of shard `index` of `prefix` (PREDICTIONS or ERRORS)."""
    return f"{prefix}_{index:05d}{SUFFIX}"


def result_lines(shown: list[dict[str, Any]], predictions: list[Any]) -> str:
    return "\n".join(wirejson.dumps({**s, "prediction": p}).decode()
                     for s, p in zip(shown, predictions, strict=True))


def error_line(shown: dict[str, Any] | None, message: str) -> str:
    """What is shown of the instance (`instance` None when the record was not valid JSON) and a
    google.rpc.Status-like error."""
    return wirejson.dumps({**(shown or {"instance": None}),
                           "error": {"status": "INVALID_ARGUMENT", "message": message}}).decode()


def predict_batch(decoder: Decoder, predict: Callable[[list[Any]], list[Any]],
                  batch: list[bytes], config: InstanceConfig = NO_CONFIG,
                  ) -> tuple[list[str], list[str], int]:
    """(result lines, error lines, predictions made) of one model batch's records; a failed
    batch is retried instance by instance, so only the bad instances are errors."""
    lines: list[str] = []
    decoded, failed = decoder.instances(batch)
    bad = [error_line(None, message) for message in failed]
    instances: list[Any] = []
    shown: list[dict[str, Any]] = []
    for instance in decoded:
        try:
            sent, seen = config.apply(instance)
        except ValueError as exc:
            bad.append(error_line({"instance": instance}, str(exc)))
            continue
        instances.append(sent)
        shown.append(seen)
    predicted = 0
    try:
        done = predict(instances) if instances else []
        if done:
            lines.append(result_lines(shown, done))
            predicted = len(done)
    except Exception:  # noqa: BLE001 - find the bad instances one by one
        for instance, seen in zip(instances, shown, strict=True):
            try:
                lines.append(result_lines([seen], predict([instance])))
                predicted += 1
            except Exception as exc:  # noqa: BLE001 - the message goes to errors_*.jsonl
                message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                bad.append(error_line(seen, f"Prediction failed: {message}"))
    return lines, bad, predicted
