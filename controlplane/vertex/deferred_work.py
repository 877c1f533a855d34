"""What Vertex AI's held long-running methods do on the task runner (deferred.py says when they
are held): UploadModel stores the model, DeployModel loads the deployed model in this process
(`work`, outside any transaction) and records it on its endpoint and model (`finish`, in the
transaction that ends the task). An error (the timing rule's `fail`, a model that cannot load,
an endpoint deleted meanwhile) ends the operation with it, as the service reports a failed
operation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controlplane.vertex import deferred, endpoints, models
from core.errors import ApiError
from registry import tasks

if TYPE_CHECKING:
    from emulator import Emulator


def upload_work(emu: Emulator, task: tasks.Task) -> None:
    """Nothing slow: the model's files were checked by the request; storing it is `finish`."""


def upload_finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    args = task.args
    response = None
    if error is None:
        try:
            with emu.store.transaction():
                response = models.store_upload(emu, args["parent"], args["model"],
                                               args["parentModel"], args["modelId"])
        except ApiError as exc:
            error = exc
    deferred.end(emu, task.name, response, "UploadModelResponse", error)


def deploy_work(emu: Emulator, task: tasks.Task) -> None:
    endpoints.load_deployed(emu, task.args["endpoint"], task.args["deployedModel"])


def deploy_finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    args = task.args
    response = None
    if error is None:
        try:
            with emu.store.transaction():
                response = endpoints.commit_deploy(emu, args["endpoint"], args["model"],
                                                   args["deployedModel"], args["trafficSplit"])
        except ApiError as exc:
            error = exc
    deferred.end(emu, task.name, response, "DeployModelResponse", error)


def register(runner: tasks.TaskRunner) -> None:
    """Give `runner` the held Vertex AI methods (boot calls this)."""
    runner.register(deferred.UPLOAD_MODEL, upload_work, upload_finish)
    runner.register(deferred.DEPLOY_MODEL, deploy_work, deploy_finish)
