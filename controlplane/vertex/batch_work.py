"""What a Vertex AI batch prediction job does on the task runner (registry/tasks.py): PENDING ->
RUNNING (the Beam pipeline in a child process, batch/launcher.py, writing Vertex AI's files,
JobSpec.layout "vertex") -> SUCCEEDED with `completionStats`, FAILED with `error`, or CANCELLED
(a cancel sets CANCELLING; the polling loop sees it and stops the pipeline's process group).
"""

from __future__ import annotations

import os
import shlex
import time
from typing import TYPE_CHECKING, Any

from batch.launcher import Run
from batch.spec import JobSpec
from controlplane import job_work
from controlplane.vertex.batch_jobs import (
    CANCELLED,
    CANCELLING,
    DONE,
    FAILED,
    FORMATS,
    RUNNING,
    SUCCEEDED,
    TASK,
)
from core.errors import ApiError, Cancelled, FailedPrecondition
from core.sizing import available_cpus
from registry import artifacts, tasks
from registry import vertex_resources as vr
from registry.resources import now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

POLL_S = 0.5


def _local(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def _update(emu: Emulator, name: str, change: Any) -> dict[str, Any]:
    """Apply `change` to the stored job in a transaction; Cancelled once a cancel came."""
    with emu.store.transaction():
        doc = emu.store.get(vr.BATCH_JOBS, name)
        if doc is None:
            raise Cancelled(f"BatchPredictionJob {name} was deleted.")
        if doc["state"] == CANCELLING:
            raise Cancelled("Job was cancelled by the user.")
        if change(doc) is not False:
            doc["updateTime"] = now_rfc3339()
            emu.store.put(vr.BATCH_JOBS, name, vr.operation_parent(name), doc)
        return doc


def build_spec(emu: Emulator, doc: dict[str, Any]) -> JobSpec:
    settings = emu.settings
    local = settings.beam_runner in job_work.LOCAL_RUNNERS
    job_work.check_beam()
    uri = doc["_artifactUri"]
    model_dir = artifacts.resolve_model_dir(uri, emu.deployments.gcs) if local else uri
    asked = int((doc.get("dedicatedResources") or {}).get("maxReplicaCount") or 1)
    return JobSpec(
        input_paths=[_local(p) for p in doc["inputConfig"]["gcsSource"]["uris"]],
        data_format=FORMATS[doc["inputConfig"]["instancesFormat"]],
        output_path=_local(doc["outputInfo"]["gcsOutputDirectory"]), model_dir=model_dir,
        framework=doc["_framework"], prediction_class=doc.get("_predictionClass", ""),
        package_uris=[model_dir if p == uri else artifacts.resolve_uri(p, gcs=emu.deployments.gcs)
                      for p in doc.get("_packageUris", [])] if local else
        list(doc.get("_packageUris", [])),
        batch_size=int(doc.get("_batchSize") or 64),
        workers=max(1, min(asked, int(available_cpus()))) if local else asked,
        runner=settings.beam_runner, runner_options=shlex.split(settings.beam_options),
        storage_emulator_host=settings.storage_emulator_host or "", layout="vertex",
        # Matched inputs and the files a file-list names resolve under these (batch/sources.py,
        # batch/vertex_inputs.py), as the create checked the paths as written.
        data_roots=None if emu.data_sources.roots is None else list(emu.data_sources.roots),
        instance_config=doc.get("instanceConfig") or None)


def work(emu: Emulator, task: tasks.Task) -> dict[str, Any]:
    name = task.name

    def start(doc: dict[str, Any]) -> None:
        doc["state"] = RUNNING
        doc["startTime"] = doc.get("startTime") or now_rfc3339()

    doc = _update(emu, name, start)
    spec = build_spec(emu, doc)
    run = Run(spec, emu.settings.jobs_path / "vertex" / name.rsplit("/", 1)[-1], emu.batch_runners)
    try:
        while not run.poll():
            time.sleep(POLL_S)
            _update(emu, name, lambda d: False)  # raises Cancelled once a cancel came
    finally:
        if not run.poll():
            run.cancel()
    outcome = run.result()
    if "error" in outcome:
        raise FailedPrecondition(f"Batch prediction failed: {outcome['error']}")
    return {"predictions": int(outcome.get("predictions", 0)),
            "errors": int(outcome.get("errors", 0))}


def finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    doc = emu.store.get(vr.BATCH_JOBS, task.name)
    if doc is None or doc["state"] in DONE:
        return
    if isinstance(error, Cancelled) or doc["state"] == CANCELLING:
        doc["state"] = CANCELLED
        doc["error"] = {"code": 1, "message": "Job was cancelled by the user."}
    elif error is not None:
        doc["state"] = FAILED
        doc["error"] = {"code": error.code.number, "message": error.message}
    else:
        doc["state"] = SUCCEEDED
        doc["completionStats"] = {"successfulCount": str(result["predictions"]),
                                  "failedCount": str(result["errors"]), "incompleteCount": "0"}
    doc["endTime"] = doc["updateTime"] = now_rfc3339()
    emu.store.put(vr.BATCH_JOBS, task.name, vr.operation_parent(task.name), doc)


def register(runner: tasks.TaskRunner) -> None:
    """Give `runner` the Vertex AI batch prediction task, as a long one (boot calls this)."""
    runner.register(TASK, work, finish, long=True)
