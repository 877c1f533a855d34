"""The model a Vertex AI custom container serves (AIP_STORAGE_URI), registered as a version so
every protocol serves it under one name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.settings import Settings
from registry import bootstrap, names
from registry.store import Store

#: Where Vertex AI's model (AIP_STORAGE_URI) is registered: model `vertex`, version `v1` of the
#: default project, so the other protocols (ml v1, V2, TF Serving) serve it under that name too.
VERTEX_MODEL, VERTEX_VERSION = "vertex", "v1"


def vertex_version_name(settings: Settings) -> str:
    return names.version_name(settings.default_project, VERTEX_MODEL, VERTEX_VERSION)


def register_vertex_model(store: Store, settings: Settings) -> str:
    """Declare the AIP_STORAGE_URI model as a bootstrap version (framework detected from its
    files, like a versions.create without `framework`); returns the version name. Its URI goes
    through registry.artifacts.resolve_uri like any deploymentUri, so whatever schemes that
    resolves (local paths, file://, gs://) work here too."""
    vertex = settings.vertex
    assert vertex is not None
    spec: dict[str, Any] = {"deploymentUri": vertex.storage_uri}
    if vertex.prediction_class:
        spec.update(predictionClass=vertex.prediction_class, packageUris=list(vertex.package_uris))
    data = {"projects": {settings.default_project: {"models": {VERTEX_MODEL: {
        "description": "The model Vertex AI deployed to this container (AIP_STORAGE_URI).",
        "versions": {VERTEX_VERSION: spec},
    }}}}}
    bootstrap.apply_data(store, data, Path.cwd(), "AIP_STORAGE_URI")
    return vertex_version_name(settings)
