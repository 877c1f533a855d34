"""Vertex AI's REST surface on the app (docs/vertex.md): its blueprints, registered with the
others, and the 501 for every Vertex AI path they do not serve, registered last."""

from __future__ import annotations

from flask import Flask

from api.vertex_batch import bp as batch_bp
from api.vertex_common import unimplemented
from api.vertex_endpoints import bp as endpoints_bp
from api.vertex_models import bp as models_bp
from api.vertex_operations import bp as operations_bp
from protocols.vertex_prediction import bp as prediction_bp


def register_vertex_api(app: Flask) -> None:
    """Models, endpoints, batch prediction jobs, operations and prediction."""
    for bp in (models_bp, endpoints_bp, batch_bp, operations_bp, prediction_bp):
        app.register_blueprint(bp)


def register_vertex_unimplemented(app: Flask) -> None:
    """The 501 for every other Vertex AI path; call after api.unimplemented's routes, so ml v1's
    coverage is computed without it and its more specific routes keep winning."""
    app.add_url_rule("/v1/projects/<project>/locations/<location>/<path:rest>",
                     "vertex_unimplemented", unimplemented,
                     methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
