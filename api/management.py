"""The ml v1 management blueprints, in the order create_app registers them."""

from __future__ import annotations

from api.iam import bp as iam_bp
from api.jobs import bp as jobs_bp
from api.models import bp as models_bp
from api.operations import bp as operations_bp
from api.versions import bp as versions_bp

BLUEPRINTS = (models_bp, versions_bp, operations_bp, iam_bp, jobs_bp)
