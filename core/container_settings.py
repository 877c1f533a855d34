"""Vertex AI's custom-container contract as settings: the AIP_* variables Vertex AI sets."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from core.envvars import LIST, Var, read, write


@dataclasses.dataclass(frozen=True)
class VertexSettings:
    """Vertex AI's custom-container contract: the AIP_* variables Vertex AI sets in a container.

    Serving mode starts when the health route, predict route and storage URI are all set
    (AIP_HTTP_PORT, the port, is read with the other ports above). Spec:
    https://cloud.google.com/vertex-ai/docs/predictions/custom-container-requirements
    """

    health_route: str
    predict_route: str
    storage_uri: str
    deployed_model_id: str | None = None
    #: A custom predictor (module.Class) and its packages for the model, like a version's
    #: predictionClass / packageUris (MLEMU_VERTEX_PREDICTION_CLASS, MLEMU_VERTEX_PACKAGE_URIS).
    prediction_class: str | None = None
    package_uris: tuple[str, ...] = ()
    #: Vertex AI's own variables, passed through unchanged to child processes.
    passthrough: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_env(cls, get: Callable[[str], str | None]) -> VertexSettings | None:
        values = read(VERTEX_SETTINGS, get)
        if not all(values.get(name) for name in ("health_route", "predict_route", "storage_uri")):
            return None
        return cls(**values, passthrough={k: v for k in AIP_PASSTHROUGH if (v := get(k) or "")})

    def to_env(self) -> dict[str, str]:
        return {**self.passthrough, **write(VERTEX_SETTINGS, self)}


#: VertexSettings' variables, declared as SETTINGS are.
VERTEX_SETTINGS = (
    Var("health_route", ("AIP_HEALTH_ROUTE",)),
    Var("predict_route", ("AIP_PREDICT_ROUTE",)),
    Var("storage_uri", ("AIP_STORAGE_URI",)),
    Var("deployed_model_id", ("AIP_DEPLOYED_MODEL_ID",)),
    Var("prediction_class", ("MLEMU_VERTEX_PREDICTION_CLASS",)),
    Var("package_uris", ("MLEMU_VERTEX_PACKAGE_URIS",), LIST),
)


#: Other variables Vertex AI sets; mlemu only passes them on (AIP_HTTP_PORT becomes MLEMU_PORT).
AIP_PASSTHROUGH = ("AIP_MODE", "AIP_MODE_VERSION", "AIP_MODEL_NAME", "AIP_ENDPOINT_ID",
                   "AIP_PROJECT_NUMBER")
