"""Plain data passed between the protocol adapters and the use cases (no Flask, no frameworks)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class ModelRef:
    """What a request names: a model, optionally one of its versions."""

    project: str
    model: str
    version: str | None = None

    @property
    def model_name(self) -> str:
        return f"projects/{self.project}/models/{self.model}"

    @property
    def resource_name(self) -> str:
        """The name permissions are checked on: the version when one is named, else the model."""
        if self.version is None:
            return self.model_name
        return f"{self.model_name}/versions/{self.version}"


@dataclasses.dataclass(frozen=True)
class Caller:
    """A verified identity (or the anonymous caller). `principal` is an IAM member string."""

    principal: str | None = None  # e.g. "user:ann@example.com", "serviceAccount:sa@p.iam..."
    authenticated: bool = False

    @property
    def is_anonymous(self) -> bool:
        return self.principal is None


ANONYMOUS = Caller()


@dataclasses.dataclass(frozen=True)
class NumericInstances:
    """Instances an adapter decoded straight into a 2-D numeric numpy array (wirearray.py).

    Predictors that declare `takes_arrays` get `array`; the others get `rows()`, exactly the
    lists the general JSON decoder would have produced for the same body.
    """

    array: Any
    rows: Callable[[], list[Any]]


@dataclasses.dataclass
class PredictRequest:
    """A decoded prediction request. `parameters` are the extra keys passed as predict kwargs."""

    instances: list[Any] | NumericInstances
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class PredictResponse:
    """Predictions in instance order, JSON-ready, plus the version that produced them."""

    predictions: Any
    version_name: str = ""
