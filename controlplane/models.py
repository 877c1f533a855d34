"""ml v1 `projects.models`: create, get, list, patch, delete.

Rules from the ml v1 reference (discovery document descriptions): names match
`^[A-Za-z][A-Za-z0-9_]{0,127}$` and are unique per project (409 `Field: model.name Error: A
model with the same name already exists.`); one region at most; patch accepts the masks
`description`, `labels` and `default_version.name` and returns an UPDATE_MODEL operation;
delete is refused while the model has versions and returns a DELETE_MODEL operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import auth
from controlplane import catalog, common, listing, operation_work, operations
from controlplane.common import (
    MODEL_SCHEMA,
    check_etag,
    field_error,
    model_json,
    parse_mask,
    refuse_if_busy,
    require_object,
)
from core.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from core.payloads import Caller
from registry import names
from registry.resources import Model, new_etag, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

MODEL_MASKS = {"description": "description", "labels": "labels",
               "default_version.name": "default_version.name",
               "defaultVersion.name": "default_version.name"}
FILTER_FIELDS = ("name", "description", "labels", "regions", "defaultVersion", "etag",
                 "onlinePredictionLogging", "onlinePredictionConsoleLogging")


def _labels(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise field_error(InvalidArgument, "model.labels", "labels must map strings to strings.")
    return dict(value)


def create_model(emu: Emulator, caller: Caller, parent: str, body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.models.create", parent)
    body = require_object(body, MODEL_SCHEMA, "model")
    model_id = names.check_id(body.get("name"), "model.name", "Model")
    project = parent.removeprefix("projects/")
    regions = body.get("regions") or []
    if not isinstance(regions, list) or len(regions) > 1:
        raise field_error(InvalidArgument, "model.regions",
                          "Only one region per model is supported.")
    for region in regions:
        catalog.check_region(region, "model.regions")
    model = Model.from_json({k: v for k, v in body.items() if k != "defaultVersion"},
                            names.model_name(project, model_id))
    model.labels = _labels(body.get("labels", {}))
    model.regions = list(regions) or ["us-central1"]  # the reference's default region
    with emu.store.transaction():
        if emu.store.get_model(model.name) is not None:
            raise field_error(AlreadyExists, "model.name",
                              "A model with the same name already exists.")
        model.create_time = now_rfc3339()
        model.etag = new_etag(model.name)
        emu.store.put_model(model)
        auth.on_model_created(emu, caller, model.name)
    return model_json(emu.store, model)


def get_model(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.models.get", name)
    return model_json(emu.store, common.get_model(emu.store, name))


def list_models(emu: Emulator, caller: Caller, parent: str, *, filter: str | None = None,
                page_size: int | None = None, page_token: str | None = None) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.models.list", parent)
    if filter is not None and "defaultVersion" in filter:  # it may read the embedded version
        return listing.list_response([model_json(emu.store, m)
                                      for m in emu.store.list_models(parent)], "models",
                                     FILTER_FIELDS, filter=filter, page_size=page_size,
                                     page_token=page_token)
    # Nothing else in a model's JSON depends on its default version, so the page is chosen on
    # the models alone and only its models are built and have their default version read;
    # without a filter, on their names alone (no document of another page is read).
    store = emu.store
    if filter:
        docs = [m.to_json() for m in store.list_models(parent)]
    else:
        docs = [{"name": name} for name in store.child_names("models", parent)]
    bare = listing.list_response(docs, "models", FILTER_FIELDS, filter=filter,
                                 page_size=page_size, page_token=page_token)
    if "models" in bare:
        found = [store.get_model(item["name"]) for item in bare["models"]]
        bare["models"] = [model_json(store, m) for m in found if m is not None]
    return bare


def patch_model(emu: Emulator, caller: Caller, name: str, body: Any,
                update_mask: str | None) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.models.update", name)
    body = require_object(body, MODEL_SCHEMA, "model")
    paths = parse_mask(update_mask, MODEL_MASKS)
    changes: dict[str, Any] = {}
    for path in paths:
        if path == "description":
            changes[path] = str(body.get("description") or "")
        elif path == "labels":
            changes[path] = _labels(body.get("labels") or {})
        else:
            default = body.get("defaultVersion")
            if not isinstance(default, dict) or not default.get("name"):
                raise field_error(InvalidArgument, "model.default_version.name",
                                  "The update mask names default_version.name but the body has no "
                                  "defaultVersion.name.")
            changes[path] = names.short(str(default["name"]))
    project, model_id = names.parse_model_name(name)
    with emu.store.transaction():
        model = common.get_model(emu.store, name)
        check_etag(body, model.etag, "model")
        refuse_if_busy(emu.store, {name}, name + "/versions/", f"Model {model_id}")
        if "default_version.name" in changes:
            version = emu.store.get_version(names.version_name(project, model_id,
                                                               changes["default_version.name"]))
            if version is None or version.state != "READY":
                raise field_error(FailedPrecondition, "model.default_version.name",
                                  f"Version {changes['default_version.name']} does not exist or is "
                                  "not READY.")
        op = operations.start(emu, project=project, op_type=operation_work.UPDATE_MODEL,
                              prefix=f"update_{model_id}", target=name, model_name=name,
                              labels=model.labels, args={"changes": changes})
    emu.tasks.submit(op.name)
    return op.to_json()


def delete_model(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.models.delete", name)
    project, model_id = names.parse_model_name(name)
    with emu.store.transaction():
        model = common.get_model(emu.store, name)
        refuse_if_busy(emu.store, {name}, name + "/versions/", f"Model {model_id}")
        if emu.store.list_versions(name):
            raise field_error(FailedPrecondition, "name", "A model with versions cannot be deleted.")
        op = operations.start(emu, project=project, op_type=operation_work.DELETE_MODEL,
                              prefix=f"delete_{model_id}", target=name, model_name=name,
                              labels=model.labels)
    emu.tasks.submit(op.name)
    return op.to_json()
