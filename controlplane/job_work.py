"""What a batch prediction job does, as registry/tasks.py runs it (off the request thread).

`work`: QUEUED -> PREPARING (resolve the model: a version's deploymentUri or the job's `uri`,
downloading gs:// models for local runners; check the framework) -> RUNNING (the Beam pipeline
in a job process the emulator's warm runner forks, batch/launcher.py) while it polls the job: a
cancel (state CANCELLING) kills the job process's group, and the workers' progress updates
`predictionCount` and `errorCount`. `finish` (in the transaction that ends the task): SUCCEEDED
with the counts and `nodeHours`, FAILED with `errorMessage`, or CANCELLED. A job whose server
died is adopted and run again from the start (its shards are rewritten), or FAILED after
registry/tasks.MAX_ATTEMPTS.

Every state change goes through `transition` (the place to count jobs by state, for metrics).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import shutil
import time
from typing import TYPE_CHECKING, Any

import predictors
from batch.launcher import Run
from batch.spec import JobSpec
from core.errors import ApiError, Cancelled, FailedPrecondition, NotFound
from core.sizing import available_cpus, available_memory, free_memory
from registry import artifacts, jobs, names, tasks
from registry.resources import Version, new_etag, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

BATCH_PREDICTION = "BATCH_PREDICTION"
#: Memory a local job is taken to need before its pipeline starts: the pipeline process (Python
#: and Beam), and per worker a framework, its model and batches of records (a batch holds at
#: most 64 MiB: batch/sources.py). Jobs start only while that much is free, so several
#: jobs at once (threads of several server processes) never start past the machine's memory.
JOB_BASE_BYTES = 512 * 1024 * 1024
JOB_WORKER_BYTES = 384 * 1024 * 1024
CANCELLING_MESSAGE = "Job is being cancelled by the user."
CANCELLED_MESSAGE = "Job was cancelled by the user."
POLL_S = 0.5
LOCAL_RUNNERS = ("DirectRunner",)
TF_ONLY = ("Batch prediction supports TensorFlow SavedModels only (as AI Platform Prediction "
           "did); this model's framework is {framework}. Set MLEMU_BATCH_ANY_FRAMEWORK=true to "
           "run scikit-learn, XGBoost and custom prediction routines in batch too.")


def transition(job: jobs.Job, state: str, message: str = "") -> None:
    """Move `job` to `state` (the caller stores it)."""
    job.state = state
    if message:
        job.error_message = message
    if state in ("SUCCEEDED", "FAILED", "CANCELLED") and not job.end_time:
        job.end_time = now_rfc3339()
    job.etag = new_etag(job.name)


def version_of(emu: Emulator, spec: dict[str, Any]) -> Version:
    """The READY version a job's modelName (its default) or versionName names."""
    if spec.get("versionName"):
        version = emu.store.get_version(spec["versionName"])
        if version is None:
            raise NotFound(f"Version {spec['versionName']} not found.")
    else:
        model = emu.store.get_model(spec["modelName"])
        if model is None:
            raise NotFound(f"Model {spec['modelName']} not found.")
        if not model.default_version:
            raise FailedPrecondition(f"Model {names.short(model.name)} has no default version; "
                                     "name a version with versionName.")
        version = emu.store.get_version(names.version_name(
            *names.parse_model_name(model.name), model.default_version))
        if version is None:
            raise NotFound(f"The default version of {model.name} was not found.")
    if version.state != "READY":
        raise FailedPrecondition(f"Version {names.short(version.name)} is {version.state}; batch "
                                 "prediction needs a READY version.")
    return version


def check_beam() -> None:
    """Beam is optional at run time (requirements-beam.txt): without it a job fails saying so."""
    if importlib.util.find_spec("apache_beam") is None:
        raise FailedPrecondition("Batch prediction needs Apache Beam, which is not installed on "
                                 "this server: pip install -r requirements-beam.txt.")


def check_framework(emu: Emulator, framework: str) -> None:
    if framework != predictors.TENSORFLOW and not emu.settings.batch_any_framework:
        raise FailedPrecondition(TF_ONLY.format(framework=framework or "a custom predictor"))


def _local_input(path: str) -> str:
    if "://" in path:
        return path
    return os.path.abspath(path)


def build_spec(emu: Emulator, job: jobs.Job) -> JobSpec:
    """The pipeline's JobSpec: the model resolved (gs:// copied for local runners), the runner
    and its worker count chosen."""
    given = job.prediction_input
    settings = emu.settings
    local = settings.beam_runner in LOCAL_RUNNERS
    gcs = emu.deployments.gcs
    if given.get("uri"):
        uri, framework, prediction_class, packages = given["uri"], "", "", []
        model_dir = artifacts.resolve_model_dir(uri, gcs)
        _, implied = predictors.find_model_file(model_dir)
        framework = implied or ""
    else:
        version = version_of(emu, given)
        uri, framework = version.deployment_uri, version.framework
        prediction_class, packages = version.prediction_class, list(version.package_uris)
        model_dir = artifacts.resolve_model_dir(uri, gcs) if local else uri
    check_framework(emu, framework)
    check_beam()
    asked = int(given.get("maxWorkerCount") or 10)
    workers = max(1, min(asked, int(available_cpus()))) if local else asked
    options = shlex.split(settings.beam_options)
    if settings.beam_runner == "DataflowRunner" and not any("max_num_workers" in o for o in options):
        options.append(f"--max_num_workers={asked}")
    if local:
        packages = [artifacts.resolve_uri(p, gcs=gcs) for p in packages]
    return JobSpec(
        input_paths=[_local_input(p) for p in given["inputPaths"]],
        data_format="JSON" if given["dataFormat"] == "TEXT" else given["dataFormat"],
        output_path=_local_input(given["outputPath"]),
        model_dir=model_dir if local else uri, framework=framework,
        prediction_class=prediction_class, package_uris=packages,
        signature_name=given.get("signatureName") or "",
        output_format="CSV" if given.get("outputDataFormat") == "CSV" else "JSON",
        batch_size=int(given.get("batchSize") or 64), workers=workers,
        runner=settings.beam_runner, runner_options=options,
        storage_emulator_host=settings.storage_emulator_host or "",
        data_roots=None if emu.data_sources.roots is None else list(emu.data_sources.roots))


def _change(emu: Emulator, name: str, state: str, *, only_from: tuple[str, ...]) -> jobs.Job:
    """Move the stored job to `state` if it is in one of `only_from`; Cancelled if a cancel came."""
    with emu.store.transaction():
        job = jobs.get_job(emu.store, name)
        if job is None:
            raise Cancelled(f"Job {name} was deleted.")
        if job.state == "CANCELLING":
            raise Cancelled(CANCELLED_MESSAGE)
        if job.state in only_from:
            if state == "PREPARING":
                job.start_time = job.start_time or now_rfc3339()
            transition(job, state)
            jobs.put_job(emu.store, job)
        return job


def _progress(emu: Emulator, name: str, counts: tuple[int, int]) -> bool:
    """Record the counts so far; False if the job is being cancelled (or is gone)."""
    with emu.store.transaction():
        job = jobs.get_job(emu.store, name)
        if job is None or job.state == "CANCELLING":
            return False
        output = dict(job.prediction_output)
        output.update(predictionCount=str(counts[0]), errorCount=str(counts[1]))
        if output != job.prediction_output:
            job.prediction_output = output
            jobs.put_job(emu.store, job)
        return True


#: Beam's WriteToText stages shards in `<outputPath>/beam-temp-<prefix>-<uuid>` folders and
#: removes them when the write finishes (apache_beam/io/filebasedsink.py, `initialize_write`);
#: a run killed (cancelled, or its server gone) leaves them behind.
BEAM_TEMP_PREFIX = "beam-temp-"


def remove_staging(output_path: str) -> None:
    """Remove the staging folders Beam left in a local `output_path` (a killed run's partial
    shards): before a run (an adopted job's earlier attempt) and after one that did not finish.
    Folders only, never through a symlink; gs:// outputs are left to the bucket's lifecycle."""
    local = output_path.removeprefix("file://")
    if "://" in local:
        return
    with contextlib.suppress(OSError), os.scandir(local) as entries:
        for entry in entries:
            if entry.name.startswith(BEAM_TEMP_PREFIX) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)


def memory_needed(spec: JobSpec) -> int:
    """What a local job waits to have free before it starts (at most half the machine's, so a
    job a small machine cannot fit still runs there, alone)."""
    need = JOB_BASE_BYTES + JOB_WORKER_BYTES * spec.workers
    return min(need, available_memory() // 2)


def _wait_for_memory(emu: Emulator, name: str, spec: JobSpec) -> None:
    """Stay PREPARING until the job's memory is free (a cancel still ends it meanwhile)."""
    if spec.runner not in LOCAL_RUNNERS:
        return  # a remote runner's workers are elsewhere
    need = memory_needed(spec)
    while free_memory() < need:
        _change(emu, name, "PREPARING", only_from=())  # raises Cancelled on a cancel
        time.sleep(POLL_S)


def work(emu: Emulator, task: tasks.Task) -> dict[str, Any]:
    name = task.name
    job = _change(emu, name, "PREPARING", only_from=("QUEUED", "PREPARING", "RUNNING"))
    spec = build_spec(emu, job)
    _wait_for_memory(emu, name, spec)
    _change(emu, name, "RUNNING", only_from=("PREPARING",))
    project, job_id = jobs.parse_job_name(name)
    started = time.monotonic()
    remove_staging(spec.output_path)  # an earlier attempt's, if this job was adopted
    run = Run(spec, emu.settings.jobs_path / project / job_id, emu.batch_runners)
    try:
        while not run.poll():
            time.sleep(POLL_S)
            # Every poll also looks for a cancel (the store is how a cancel reaches this thread).
            if not _progress(emu, name, run.progress()):
                raise Cancelled(CANCELLED_MESSAGE)
    finally:
        if not run.poll():
            run.cancel()
            remove_staging(spec.output_path)
    outcome = run.result()
    if "error" in outcome:
        remove_staging(spec.output_path)
        raise FailedPrecondition(f"Batch prediction failed: {outcome['error']}")
    seconds = time.monotonic() - started
    return {"predictions": int(outcome.get("predictions", 0)),
            "errors": int(outcome.get("errors", 0)),
            # Node hours as the service billed them: worker time, here wall time x workers.
            "nodeHours": round(seconds * spec.workers / 3600.0, 6)}


def finish(emu: Emulator, task: tasks.Task, result: Any, error: ApiError | None) -> None:
    job = jobs.get_job(emu.store, task.name)
    if job is None or job.done:
        return
    if isinstance(error, Cancelled) or job.state == "CANCELLING":
        transition(job, "CANCELLED", CANCELLED_MESSAGE)
    elif error is not None:
        transition(job, "FAILED", error.message)
    else:
        job.prediction_output = {**job.prediction_output,
                                 "predictionCount": str(result["predictions"]),
                                 "errorCount": str(result["errors"]),
                                 "nodeHours": result["nodeHours"]}
        transition(job, "SUCCEEDED")
    jobs.put_job(emu.store, job)


def register(runner: tasks.TaskRunner) -> None:
    """Give `runner` (the emulator's TaskRunner) the batch prediction job task, as a long one;
    build_emulator calls this before the runner adopts any task."""
    runner.register(BATCH_PREDICTION, work, finish, long=True)
