"""Checks shared by the management use cases: request bodies, field masks, etags, lookups, and
"an operation is already in progress".

Error texts follow AI Platform's `Field: <field> Error: <description>` form with a
google.rpc.BadRequest detail (as in the 409 `Field: model.name Error: A model with the same name
already exists.` the real service returns; quoted in tensorflow/tfx#712).
"""

from __future__ import annotations

import json
from typing import Any

from core.errors import Aborted, ApiError, FailedPrecondition, InvalidArgument, NotFound, field_violation
from registry import discovery, jobs, lookup, names, tasks
from registry.resources import Model, Version
from registry.store import Store

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "boolean": bool, "array": list, "object": dict, "integer": (int, str),
}
_TYPE_NAMES = {"string": "TYPE_STRING", "boolean": "TYPE_BOOL", "integer": "TYPE_INT32"}
MODEL_SCHEMA = "GoogleCloudMlV1__Model"
VERSION_SCHEMA = "GoogleCloudMlV1__Version"


def field_error(cls: type[ApiError], field: str, description: str) -> ApiError:
    return cls(f"Field: {field} Error: {description}", details=field_violation(field, description))


def require_object(body: Any, schema: str, where: str) -> dict[str, Any]:
    """The JSON object `body`, refusing unknown field names the way Google's front end does."""
    if not isinstance(body, dict):
        raise InvalidArgument(f"Invalid JSON payload received. The {where} must be a JSON object.")
    known = discovery.fields(schema)
    for key, value in body.items():
        if key not in known:
            raise InvalidArgument(
                f'Invalid JSON payload received. Unknown name "{key}" at \'{where}\': '
                "Cannot find field."
            )
        wanted = _JSON_TYPES.get(known[key])
        if value is not None and wanted is not None and \
                (not isinstance(value, wanted) or (wanted is int and isinstance(value, bool))):
            raise InvalidArgument(
                f"Invalid value at '{where}.{key}' ({_TYPE_NAMES.get(known[key], known[key])}), "
                f"{json.dumps(value)[:100]}"
            )
    return body


def parse_mask(update_mask: str | None, allowed: dict[str, str]) -> list[str]:
    """Canonical paths of a comma-separated field mask; `allowed` maps accepted spellings
    (snake_case and camelCase) to canonical paths. Empty or unknown paths are INVALID_ARGUMENT."""
    paths = [p.strip() for p in (update_mask or "").split(",") if p.strip()]
    if not paths:
        raise field_error(InvalidArgument, "update_mask",
                          "updateMask is required and must name at least one field.")
    canonical: list[str] = []
    for path in paths:
        if path not in allowed:
            supported = ", ".join(sorted(set(allowed.values())))
            raise field_error(InvalidArgument, "update_mask",
                              f"The update mask path {path!r} is not supported. Supported: "
                              f"{supported}.")
        if allowed[path] not in canonical:
            canonical.append(allowed[path])
    return canonical


def check_etag(body: dict[str, Any], current: str, kind: str) -> None:
    """Optimistic concurrency: an etag in the request must match the resource's current one."""
    given = body.get("etag")
    if given and given != current:
        raise Aborted(
            f"The etag {given!r} does not match the {kind}'s current etag {current!r}: the {kind} "
            "was changed since it was read. Read it again and retry."
        )


def get_model(store: Store, name: str) -> Model:
    model = store.get_model(name)
    if model is None:
        raise lookup.model_not_found(names.short(name))
    return model


def get_version(store: Store, name: str) -> Version:
    version = store.get_version(name)
    if version is None:
        raise lookup.version_not_found(name)
    return version


def get_job(store: Store, name: str) -> jobs.Job:
    job = jobs.get_job(store, name)
    if job is None:
        raise NotFound(f"Job {name} not found.")
    return job


def model_name_of(project: str, model: str) -> str:
    return names.model_name(project, model)


def refuse_if_busy(store: Store, targets: set[str], prefix: str | None, what: str) -> None:
    """FAILED_PRECONDITION while an operation on `targets` (or under `prefix`) is unfinished."""
    running = tasks.touching(store, targets, prefix)
    if running:
        raise field_error(FailedPrecondition, "name",
                          f"{what} has an operation in progress ({running[0].name}); wait for it "
                          "to finish or cancel it.")


def not_found_operation(name: str) -> NotFound:
    return NotFound(f"Operation {name} was not found.")


def version_json(store: Store, version: Version, model: Model | None = None) -> dict[str, Any]:
    """A Version as the API shows it, with isDefault when it is its model's default."""
    model = model or store.get_model(names.model_of(version.name))
    is_default = model is not None and model.default_version == names.short(version.name)
    return version.to_json(is_default=is_default)


def model_json(store: Store, model: Model) -> dict[str, Any]:
    """A Model as the API shows it, with its default version embedded."""
    default = None
    if model.default_version:
        default = store.get_version(names.version_name(*names.parse_model_name(model.name),
                                                       model.default_version))
    return model.to_json(default)


def typed(body: dict[str, Any], message: str) -> dict[str, Any]:
    """An Operation response: the resource tagged with its protobuf type (google.protobuf.Any)."""
    return {"@type": f"type.googleapis.com/google.cloud.ml.v1.{message}", **body}
