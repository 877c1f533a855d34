"""The code under test: a small service that scores rows with an AI Platform model through
Google's client library, retrying what Google says may be retried."""

from __future__ import annotations

from typing import Any


def score(ml: Any, model: str, rows: list[list[float]]) -> list[Any]:
    """Predictions for `rows` from `model` (projects/P/models/M), with up to 3 retries."""
    request = ml.projects().predict(name=model, body={"instances": rows})
    return list(request.execute(num_retries=3)["predictions"])
