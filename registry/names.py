"""ml v1 resource names: building, parsing and validating them.

Model and version ids follow AI Platform's rule: a letter, then letters, digits or underscores,
128 characters at most.
"""

from __future__ import annotations

import re

from core.errors import InvalidArgument, field_violation

# Used with fullmatch only: `$` also matches before a final newline, which let "m\n" through.
ID_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
PROJECT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_MODEL_NAME = re.compile(r"projects/([^/]+)/models/([^/]+)")
_VERSION_NAME = re.compile(r"projects/([^/]+)/models/([^/]+)/versions/([^/]+)")


def project_name(project: str) -> str:
    return f"projects/{project}"


def model_name(project: str, model: str) -> str:
    return f"projects/{project}/models/{model}"


def version_name(project: str, model: str, version: str) -> str:
    return f"projects/{project}/models/{model}/versions/{version}"


def operation_name(project: str, operation: str) -> str:
    return f"projects/{project}/operations/{operation}"


def model_of(version: str) -> str:
    """`projects/p/models/m` from a version name."""
    return version.rsplit("/versions/", 1)[0]


def short(name: str) -> str:
    """The last id of a resource name."""
    return name.rsplit("/", 1)[-1]


def parse_model_name(name: str) -> tuple[str, str]:
    match = _MODEL_NAME.fullmatch(name)
    if not match:
        raise InvalidArgument(f"Invalid model name {name!r}: expected projects/PROJECT/models/MODEL.")
    return match.group(1), match.group(2)


def parse_version_name(name: str) -> tuple[str, str, str]:
    match = _VERSION_NAME.fullmatch(name)
    if not match:
        raise InvalidArgument(
            f"Invalid version name {name!r}: expected projects/PROJECT/models/MODEL/versions/VERSION."
        )
    return match.group(1), match.group(2), match.group(3)


def check_id(value: str | None, field: str, kind: str) -> str:
    """Validate a model or version id the way AI Platform does; returns it."""
    if not value or not ID_RE.fullmatch(value):
        description = (
            f"{kind} name must start with a letter and contain only letters, numbers and "
            "underscores, with at most 128 characters."
        )
        raise InvalidArgument(
            f"Field: {field} Error: {description}", details=field_violation(field, description)
        )
    return value
