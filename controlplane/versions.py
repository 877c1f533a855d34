"""ml v1 `projects.models.versions`: create, get, list, patch, delete, setDefault.

Rules from the ml v1 reference (discovery document descriptions): the first version to be
deployed becomes the model's default and only setDefault changes it afterwards; the default
version cannot be deleted unless it is the only one left; `framework` must not be given with
`predictionClass`; patch accepts the masks `description`, `labels`, `requestLoggingConfig`,
`autoScaling.minNodes` and `manualScaling.nodes`. create, patch and delete return operations
(CREATE_VERSION, UPDATE_VERSION, DELETE_VERSION) and hold the version in CREATING, UPDATING or
DELETING meanwhile; nothing else may change a version while it has an operation in progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import auth
import explainers
import predictors
from controlplane import catalog, common, listing, operation_work, operations
from controlplane.common import (
    VERSION_SCHEMA,
    check_etag,
    field_error,
    parse_mask,
    refuse_if_busy,
    require_object,
    version_json,
)
from controlplane.request_logging import check_logging_config
from core.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from core.payloads import Caller
from registry import names
from registry.resources import Version, new_etag, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

VERSION_MASKS = {
    "description": "description", "labels": "labels",
    "requestLoggingConfig": "requestLoggingConfig", "request_logging_config": "requestLoggingConfig",
    "autoScaling.minNodes": "autoScaling.minNodes", "auto_scaling.min_nodes": "autoScaling.minNodes",
    "manualScaling.nodes": "manualScaling.nodes", "manual_scaling.nodes": "manualScaling.nodes",
}
FILTER_FIELDS = ("name", "description", "labels", "state", "framework", "deploymentUri",
                 "isDefault", "createTime", "lastUseTime", "runtimeVersion", "pythonVersion",
                 "machineType", "predictionClass", "errorMessage", "etag")


def _check_spec(body: dict[str, Any], any_framework: bool) -> None:
    if body.get("container"):
        raise field_error(InvalidArgument, "version.container",
                          "Custom containers are not supported by mlemu; deploy a model "
                          "directory (deploymentUri) or a custom prediction routine.")
    if not body.get("deploymentUri"):
        raise field_error(InvalidArgument, "version.deployment_uri", "deploymentUri is required.")
    framework = str(body.get("framework") or "").upper()
    if framework not in ("", "FRAMEWORK_UNSPECIFIED", *predictors.FRAMEWORKS):
        raise field_error(InvalidArgument, "version.framework",
                          f"Unknown framework {body['framework']!r}; valid values are "
                          f"{', '.join(predictors.FRAMEWORKS)}.")
    if framework not in ("", "FRAMEWORK_UNSPECIFIED") and body.get("predictionClass"):
        raise field_error(InvalidArgument, "version.framework",
                          "Do not specify a framework when deploying a custom prediction routine "
                          "(predictionClass).")
    uris = body.get("packageUris", [])
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        raise field_error(InvalidArgument, "version.package_uris",
                          "packageUris must be a list of strings.")
    labels = body.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise field_error(InvalidArgument, "version.labels", "labels must map strings to strings.")
    catalog.check_runtime_version(body.get("runtimeVersion"), "version.runtime_version")
    if body.get("explanationConfig") is not None:
        _check_explanation(body["explanationConfig"], framework, bool(body.get("predictionClass")),
                           any_framework)
    if check_logging_config(body.get("requestLoggingConfig")) is None:
        body.pop("requestLoggingConfig", None)


def _check_explanation(config: Any, framework: str, custom: bool, any_framework: bool) -> None:
    """One method, counts in range, and (when the framework is declared) a method it can run
    (MLEMU_EXPLAIN_ANY_FRAMEWORK: on other frameworks than TensorFlow too); an undeclared
    framework is checked once the model is loaded (operation_work.py)."""
    try:
        method = explainers.parse_config(config)
        if custom or framework not in ("", "FRAMEWORK_UNSPECIFIED"):
            explainers.check_framework(method, "" if custom else framework, any_framework)
    except InvalidArgument as exc:
        raise field_error(InvalidArgument, "version.explanation_config", exc.message) from None


def create_version(emu: Emulator, caller: Caller, parent: str, body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.versions.create", parent)
    body = require_object(body, VERSION_SCHEMA, "version")
    version_id = names.check_id(body.get("name"), "version.name", "Version")
    _check_spec(body, emu.settings.explain_any_framework)
    # Before anything reads the files (loading a pickle runs its code): only allowed sources.
    emu.sources.check(body["deploymentUri"], "version.deployment_uri")
    for uri in body.get("packageUris", []):
        emu.sources.check(uri, "version.package_uris")
    project, model_id = names.parse_model_name(parent)
    version = Version.from_json(body, names.version_name(project, model_id, version_id))
    if version.framework == "FRAMEWORK_UNSPECIFIED":
        version.framework = ""
    version.state, version.create_time = "CREATING", now_rfc3339()
    version.etag = new_etag(version.name)
    with emu.store.transaction():
        model = common.get_model(emu.store, parent)
        refuse_if_busy(emu.store, {parent, version.name}, None, f"Model {model_id}")
        if emu.store.get_version(version.name) is not None:
            raise field_error(AlreadyExists, "version.name",
                              "A version with the same name already exists.")
        emu.store.put_version(version)
        op = operations.start(emu, project=project, op_type=operation_work.CREATE_VERSION,
                              prefix=f"create_{model_id}_{version_id}", target=version.name,
                              model_name=parent, version=version_json(emu.store, version, model),
                              labels=version.labels or model.labels, args={"uid": version.uid})
    emu.tasks.submit(op.name)
    return op.to_json()


def get_version(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.versions.get", name)
    return version_json(emu.store, common.get_version(emu.store, name))


def list_versions(emu: Emulator, caller: Caller, parent: str, *, filter: str | None = None,
                  page_size: int | None = None, page_token: str | None = None) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.versions.list", parent)
    model = common.get_model(emu.store, parent)
    items = [version_json(emu.store, v, model) for v in emu.store.list_versions(parent)]
    return listing.list_response(items, "versions", FILTER_FIELDS, filter=filter,
                                 page_size=page_size, page_token=page_token)


def _value(body: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        body = body.get(part) if isinstance(body, dict) else None  # type: ignore[assignment]
    return body


def _refuse_unless_ready(version: Version, done_to: str) -> None:
    if version.state != "READY":
        raise field_error(FailedPrecondition, "name",
                          f"Version {names.short(version.name)} is {version.state}; only a READY "
                          f"version can be {done_to}.")


def patch_version(emu: Emulator, caller: Caller, name: str, body: Any,
                  update_mask: str | None) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.versions.update", name)
    body = require_object(body, VERSION_SCHEMA, "version")
    changes = {path: _value(body, path) for path in parse_mask(update_mask, VERSION_MASKS)}
    if "labels" in changes:
        _check_spec({"deploymentUri": "-", "labels": changes["labels"] or {}}, True)
        changes["labels"] = dict(changes["labels"] or {})
    if "description" in changes:
        changes["description"] = str(changes["description"] or "")
    if "requestLoggingConfig" in changes:
        changes["requestLoggingConfig"] = check_logging_config(changes["requestLoggingConfig"])
    project, model_id, version_id = names.parse_version_name(name)
    with emu.store.transaction():
        version = common.get_version(emu.store, name)
        check_etag(body, version.etag, "version")
        refuse_if_busy(emu.store, {names.model_of(name), name}, None, f"Version {version_id}")
        _refuse_unless_ready(version, "updated")
        previous, version.state = version.state, "UPDATING"
        emu.store.put_version(version)
        op = operations.start(emu, project=project, op_type=operation_work.UPDATE_VERSION,
                              prefix=f"update_{model_id}_{version_id}", target=name,
                              model_name=names.model_of(name), version=version_json(emu.store, version),
                              labels=version.labels,
                              args={"uid": version.uid, "previous_state": previous, "changes": changes})
    emu.tasks.submit(op.name)
    return op.to_json()


def delete_version(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.versions.delete", name)
    project, model_id, version_id = names.parse_version_name(name)
    model_name = names.model_of(name)
    with emu.store.transaction():
        version = common.get_version(emu.store, name)
        refuse_if_busy(emu.store, {model_name, name}, None, f"Version {version_id}")
        model = common.get_model(emu.store, model_name)
        if model.default_version == version_id and len(emu.store.list_versions(model_name)) > 1:
            raise field_error(FailedPrecondition, "name",
                              f"Cannot delete the default version {version_id} of model "
                              f"{model_id} while it has other versions. Set another version as "
                              "the default first (versions.setDefault).")
        previous, version.state = version.state, "DELETING"
        emu.store.put_version(version)
        op = operations.start(emu, project=project, op_type=operation_work.DELETE_VERSION,
                              prefix=f"delete_{model_id}_{version_id}", target=name,
                              model_name=model_name, version=version_json(emu.store, version, model),
                              labels=version.labels,
                              args={"uid": version.uid, "previous_state": previous})
    emu.tasks.submit(op.name)
    return op.to_json()


def set_default_version(emu: Emulator, caller: Caller, name: str, body: Any) -> dict[str, Any]:
    model_name = names.model_of(name)
    auth.authorize(emu, caller, "ml.models.update", model_name)
    if body not in (None, {}) and not isinstance(body, dict):
        raise InvalidArgument("Invalid JSON payload received. The request must be a JSON object.")
    for key in body or {}:
        raise InvalidArgument(f'Invalid JSON payload received. Unknown name "{key}": Cannot find '
                              "field.")
    with emu.store.transaction():
        version = common.get_version(emu.store, name)
        model = common.get_model(emu.store, model_name)
        refuse_if_busy(emu.store, {model_name}, None, f"Model {names.short(model_name)}")
        _refuse_unless_ready(version, "made the default")
        if model.default_version != names.short(name):
            model.default_version = names.short(name)
            model.etag = new_etag(model.name)
            emu.store.put_model(model)
        return version_json(emu.store, version, model)
