"""What each long-running operation does, as registry/tasks.py runs it (`register` gives the
emulator's TaskRunner these steps where the emulator is built): `work` off the request
thread (safe to repeat after a crash), `finish` inside the transaction that ends the operation,
and how a cancelled operation puts its resource back.

versions.create resolves deploymentUri and packageUris (local paths, file:// URIs, or gs:// URIs
downloaded into the state directory's cache), checks the model file against the framework, loads
the model once through this process's deployments (so it is warm here), checks an explanationConfig
against the loaded framework and its explanation_metadata.json (explainers/), and ends READY, or FAILED
with the load error (a missing bucket or object included) as errorMessage. The first version to
become READY becomes the model's default, as the versions.create reference says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import auth
import explainers
from controlplane import operations
from controlplane.common import model_json, typed, version_json
from core.errors import Aborted, ApiError, FailedPrecondition, from_code
from observability import request_log_store
from registry import artifacts, names, tasks
from registry.resources import Version, new_etag

if TYPE_CHECKING:
    from emulator import Emulator

CREATE_VERSION = "CREATE_VERSION"
DELETE_VERSION = "DELETE_VERSION"
UPDATE_VERSION = "UPDATE_VERSION"
UPDATE_MODEL = "UPDATE_MODEL"
DELETE_MODEL = "DELETE_MODEL"


def _same_version(emu: Emulator, task: tasks.Task) -> Version | None:
    """The version a task was started for (None if it was deleted, or deleted and re-created)."""
    version = emu.store.get_version(task.target)
    if version is None or version.uid != task.args.get("uid"):
        return None
    return version


def _gone(emu: Emulator, task: tasks.Task) -> None:
    operations.finish(emu.store, task.name,
                      error=Aborted(f"{task.target} changed while the operation was running."))


# --- versions.create ---------------------------------------------------------------------

def create_version_work(emu: Emulator, task: tasks.Task) -> dict[str, Any]:
    version = _same_version(emu, task)
    if version is None:
        raise Aborted(f"{task.target} was deleted before it was created.")
    # Resolving (downloading gs:// artifacts), the model-file check and loading all happen in
    # deployments, once, and the predictor stays warm in this process.
    predictor = emu.deployments.get(version)
    if version.explanation_config:
        model_dir = artifacts.resolve_model_dir(version.deployment_uri, emu.deployments.gcs)
        explainers.check_deployable(version.explanation_config, predictor, model_dir,
                                    emu.settings.explain_any_framework)
    return {"framework": version.framework or predictor.framework}


def create_version_finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    version = _same_version(emu, task)
    if version is None:
        _gone(emu, task)
        return
    model = emu.store.get_model(names.model_of(version.name))
    if error is not None:
        version.state = "FAILED"
        version.error_message = f"Create Version failed. {error.message}"
    else:
        version.state, version.error_message = "READY", ""
        version.framework = result["framework"]
        if model is not None and not model.default_version:
            model.default_version = names.short(version.name)
            model.etag = new_etag(model.name)
            emu.store.put_model(model)
    version.etag = new_etag(version.name)
    emu.store.put_version(version)
    body = version_json(emu.store, version, model)
    if error is not None:
        operations.finish(emu.store, task.name, error=from_code(error.code, version.error_message),
                          version=body)
    else:
        operations.finish(emu.store, task.name, response=typed(body, "Version"), version=body)


def create_version_revert(emu: Emulator, task: tasks.Task) -> None:
    version = _same_version(emu, task)
    if version is not None:
        version.state, version.error_message = "FAILED", "Version creation was cancelled."
        version.etag = new_etag(version.name)
        emu.store.put_version(version)
    emu.deployments.drop(task.target)


# --- versions.delete / versions.patch ----------------------------------------------------

def _nothing(emu: Emulator, task: tasks.Task) -> None:
    return None


def _restore_state(emu: Emulator, task: tasks.Task) -> None:
    version = _same_version(emu, task)
    if version is not None:
        version.state = task.args.get("previous_state", "READY")
        emu.store.put_version(version)


def delete_version_finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    version = _same_version(emu, task)
    if version is None:
        operations.finish(emu.store, task.name)
        return
    if error is not None:
        _restore_state(emu, task)
        operations.finish(emu.store, task.name, error=error)
        return
    emu.store.delete("versions", version.name)
    request_log_store.forget(emu.store, version.name)  # its request-response log rows too
    model = emu.store.get_model(names.model_of(version.name))
    if model is not None and model.default_version == names.short(version.name):
        model.default_version = None
        model.etag = new_etag(model.name)
        emu.store.put_model(model)
    emu.deployments.drop(version.name)  # other processes notice: the store no longer has it
    operations.finish(emu.store, task.name)


def _set_path(body: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        body = body.setdefault(part, {})
    body[leaf] = value


def update_version_finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    version = _same_version(emu, task)
    if version is None:
        _gone(emu, task)
        return
    version.state = task.args.get("previous_state", "READY")
    if error is None:
        for path, value in task.args["changes"].items():
            if path in ("description", "labels"):
                setattr(version, path, value)
            else:  # requestLoggingConfig, autoScaling.minNodes, manualScaling.nodes
                _set_path(version.extra, path, value)
        version.etag = new_etag(version.name)
    emu.store.put_version(version)
    body = version_json(emu.store, version)
    if error is not None:
        operations.finish(emu.store, task.name, error=error, version=body)
    else:
        operations.finish(emu.store, task.name, response=typed(body, "Version"), version=body)


# --- models.patch / models.delete --------------------------------------------------------

def update_model_finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    model = emu.store.get_model(task.target)
    if model is None:
        _gone(emu, task)
        return
    if error is None:
        changes = task.args["changes"]
        if "default_version.name" in changes:
            wanted = emu.store.get_version(names.version_name(
                *names.parse_model_name(model.name), changes["default_version.name"]))
            if wanted is None or wanted.state != "READY":
                error = FailedPrecondition(
                    f"Version {changes['default_version.name']} is no longer READY; the default "
                    "version was not changed.")
            else:
                model.default_version = changes["default_version.name"]
        if error is None:
            model.description = changes.get("description", model.description)
            model.labels = changes.get("labels", model.labels)
            model.etag = new_etag(model.name)
            emu.store.put_model(model)
    if error is not None:
        operations.finish(emu.store, task.name, error=error)
    else:
        operations.finish(emu.store, task.name, response=typed(model_json(emu.store, model), "Model"))


def delete_model_finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    if error is None and emu.store.list_versions(task.target):
        error = FailedPrecondition("A model with versions cannot be deleted.")
    if error is None:
        emu.store.delete("models", task.target)
        auth.on_model_deleted(emu, task.target)
    operations.finish(emu.store, task.name, error=error)


def register(runner: tasks.TaskRunner) -> None:
    """Give `runner` (the emulator's TaskRunner) the work, finish and cancel steps of every ml v1
    long-running operation; build_emulator calls this before the runner adopts any task."""
    runner.register(CREATE_VERSION, create_version_work, create_version_finish,
                    create_version_revert)
    runner.register(DELETE_VERSION, _nothing, delete_version_finish, _restore_state)
    runner.register(UPDATE_VERSION, _nothing, update_version_finish, _restore_state)
    runner.register(UPDATE_MODEL, _nothing, update_model_finish)
    runner.register(DELETE_MODEL, _nothing, delete_model_finish)
