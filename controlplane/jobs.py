"""ml v1 `projects.jobs` for batch prediction: create, get, list, cancel, patch (IAM: iam.py).

Rules from the ml v1 reference (discovery document) and the batch prediction guide
(https://cloud.google.com/ai-platform/prediction/docs/batch-predict):
- A job names its model by exactly one of `modelName` (its default version), `versionName` or
  `uri` (a SavedModel directory). "AI Platform Prediction only supports getting batch predictions
  from TensorFlow models": other frameworks are refused unless MLEMU_BATCH_ANY_FRAMEWORK is on.
- `dataFormat` JSON or TEXT (deprecated spelling of JSON: one instance per line), TF_RECORD or
  TF_RECORD_GZIP ("Currently available only for input data"); CSV is "available only for
  output data" (`outputDataFormat` CSV: batch/records.py has its layout). `outputDataFormat`
  defaults to JSON; `batchSize` to 64, `maxWorkerCount` to 10.
- Job ids are unique per project (409 on a duplicate); `patch` updates `labels` only ("Currently
  the only supported fields to update are `labels`"), with the job's etag.
- Training jobs (`trainingInput`) are not emulated: 501 UNIMPLEMENTED says so.
Permissions: `ml.jobs.*` on the project or the job, plus `ml.models.predict` (modelName) or
`ml.versions.predict` (versionName) on the model the job runs. A `uri` that lies in the files of
a registered version (any project's: viewers see every `deploymentUri`) runs that version's
model, so it needs `ml.versions.predict` on one such version, as `versionName` would.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import auth
from controlplane import catalog, common, job_work, listing
from controlplane.common import check_etag, field_error, parse_mask, require_object
from core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    ModelLoadError,
    PermissionDenied,
    Unimplemented,
)
from core.payloads import Caller
from registry import artifacts, jobs, names, tasks
from registry.resources import Version, new_etag, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

JOB_SCHEMA = "GoogleCloudMlV1__Job"
INPUT_SCHEMA = "GoogleCloudMlV1__PredictionInput"
INPUT_FORMATS = ("JSON", "TEXT", "TF_RECORD", "TF_RECORD_GZIP")
OUTPUT_FORMATS = ("JSON", "TEXT", "CSV")
DEFAULT_MAX_WORKERS = 10
JOB_MASKS = {"labels": "labels"}
FILTER_FIELDS = ("jobId", "state", "labels", "createTime", "startTime", "endTime", "errorMessage",
                 "predictionInput", "predictionOutput", "etag")
_SNAKE = {"outputPath": "output_path", "region": "region", "batchSize": "batch_size",
          "maxWorkerCount": "max_worker_count"}


INT64_MAX = 2**63 - 1
#: What a job's paths may be: local paths, file:// and gs:// URIs. The real service reads Cloud
#: Storage only ("inputPaths: The Cloud Storage location of the input data files", the ml v1
#: reference); another scheme (s3://, hdfs://) would fail only once the job runs, in the words of
#: whichever library tried it.
PATH_SCHEMES = ("", "file", "gs")


def _int64(value: Any, field: str) -> int:
    """An int64 field as JSON carries it (a number or a decimal string; never a bool)."""
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(value)
        number = int(value)
        if not -INT64_MAX - 1 <= number <= INT64_MAX:
            raise ValueError(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgument(f"Invalid value at '{field}' (TYPE_INT64), {value!r}") from None
    if number <= 0:
        raise field_error(InvalidArgument, field, f"{field} must be positive, got {number}.")
    return number


def _check_input(spec: Any) -> dict[str, Any]:
    where = "job.prediction_input"
    spec = require_object(spec, INPUT_SCHEMA, where)
    data_format = str(spec.get("dataFormat") or "")
    if data_format == "CSV":
        raise field_error(InvalidArgument, f"{where}.data_format",
                          "CSV is available only for output data, not as an input format.")
    if data_format not in INPUT_FORMATS:
        raise field_error(InvalidArgument, f"{where}.data_format",
                          f"dataFormat is required: one of {', '.join(INPUT_FORMATS)}.")
    output_format = str(spec.get("outputDataFormat") or "JSON")
    if output_format not in (*OUTPUT_FORMATS, "DATA_FORMAT_UNSPECIFIED"):
        why = "is available only for input data" if output_format in INPUT_FORMATS else \
            "is not a data format"
        raise field_error(InvalidArgument, f"{where}.output_data_format",
                          f"outputDataFormat {output_format} {why}; use one of "
                          f"{', '.join(OUTPUT_FORMATS)}.")
    paths = spec.get("inputPaths")
    if not paths or not all(isinstance(p, str) and p for p in paths):
        raise field_error(InvalidArgument, f"{where}.input_paths",
                          "inputPaths must name at least one file or pattern.")
    for field in ("outputPath", "region"):
        if not spec.get(field):
            raise field_error(InvalidArgument, f"{where}.{_SNAKE[field]}", f"{field} is required.")
    catalog.check_region(spec["region"], f"{where}.region")
    for field, values in (("input_paths", paths), ("output_path", [spec["outputPath"]]),
                          ("uri", [spec.get("uri")] if spec.get("uri") else [])):
        for value in values:
            if not isinstance(value, str) or _scheme(value) not in PATH_SCHEMES:
                raise field_error(InvalidArgument, f"{where}.{field}",
                                  f"{value!r} is not a local path or a gs:// URI.")
    given = [f for f in ("modelName", "versionName", "uri") if spec.get(f)]
    if len(given) != 1:
        raise field_error(InvalidArgument, f"{where}.model_version",
                          "Specify exactly one of modelName, versionName or uri.")
    normal = dict(spec)
    for field in ("batchSize", "maxWorkerCount"):
        if spec.get(field) is not None:  # int64: a JSON string on the way out
            normal[field] = str(_int64(spec[field], f"{where}.{_SNAKE[field]}"))
    return normal


def _scheme(path: str) -> str:
    scheme, sep, _ = path.partition("://")
    return scheme.lower() if sep else ""


def _authorize_model(emu: Emulator, caller: Caller, spec: dict[str, Any], project: str) -> None:
    """The caller must be allowed to predict with the model the job runs (and it must exist)."""
    if spec.get("uri"):
        # The model files a job loads come from allowed sources only, as versions.create's do:
        # loading a pickle runs it.
        emu.sources.check(spec["uri"], "job.prediction_input.uri")
        _authorize_files(emu, caller, spec["uri"])
        return
    if spec.get("versionName"):
        name = spec["versionName"]
        proj, _, _ = names.parse_version_name(name)
        permission = "ml.versions.predict"
    else:
        name = spec["modelName"]
        proj, _ = names.parse_model_name(name)
        permission = "ml.models.predict"
    if proj != project:
        raise field_error(InvalidArgument, "job.prediction_input.model_name",
                          f"{name} is not in project {project}.")
    auth.authorize(emu, caller, permission, name)
    version = job_work.version_of(emu, spec)
    catalog.check_batch_machine_type(version, "job.prediction_input.model_version")
    job_work.check_framework(emu, version.framework)


def _location(uri: str) -> str:
    """Where `uri`'s files are, comparable across spellings: a local path resolved (symlinks,
    `..`, file://), a gs:// URI without its trailing slash."""
    if artifacts.is_remote(uri):
        return uri.rstrip("/")
    try:
        return os.path.realpath(artifacts.resolve_uri(uri))
    except ModelLoadError:
        return uri


def _serves(version: Version, place: str) -> bool:
    """Whether `place` (a _location) is the directory of `version`'s files or inside it."""
    home = _location(version.deployment_uri) if version.deployment_uri else ""
    if not home:
        return False
    homes = [home]
    if artifacts.is_remote(home) and "." in home.rsplit("/", 1)[-1]:
        homes.append(home.rsplit("/", 1)[0])  # gs://b/m/model.joblib stands for gs://b/m
    return any(place == h or place.startswith(h + "/") for h in homes)


def _authorize_files(emu: Emulator, caller: Caller, uri: str) -> None:
    """A job's `uri` inside a registered version's files runs that version's model: the caller
    must be allowed to predict with it (with one of them, when several versions share the
    files). The refusal names no version: the caller may not know which one it is."""
    if not auth.enforced(emu):
        return
    place = _location(uri)
    serving = [v for v in emu.store.every_version() if _serves(v, place)]
    if serving and not any("ml.versions.predict" in auth.granted(emu, caller, v.name)
                           for v in serving):
        raise PermissionDenied("Permission 'ml.versions.predict' denied on the model version "
                               "whose files job.prediction_input.uri names.")


def create_job(emu: Emulator, caller: Caller, parent: str, body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.jobs.create", parent)
    body = require_object(body, JOB_SCHEMA, "job")
    if body.get("trainingInput"):
        raise Unimplemented("Training jobs (trainingInput) are not emulated by mlemu; only batch "
                            "prediction jobs (predictionInput) are.")
    job_id = jobs.check_job_id(body.get("jobId"))
    if not body.get("predictionInput"):
        raise field_error(InvalidArgument, "job.prediction_input",
                          "predictionInput is required for a batch prediction job.")
    spec = _check_input(body["predictionInput"])
    labels = body.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise field_error(InvalidArgument, "job.labels", "labels must map strings to strings.")
    project = parent.removeprefix("projects/")
    _authorize_model(emu, caller, spec, project)
    # A job reads and writes files as the server's user: local paths only from the data roots.
    for path in spec["inputPaths"]:
        emu.data_sources.check(path, "job.prediction_input.input_paths")
    emu.data_sources.check(spec["outputPath"], "job.prediction_input.output_path")
    name = jobs.job_name(project, job_id)
    job = jobs.Job(name=name, prediction_input=spec, state="QUEUED", labels=dict(labels),
                   create_time=now_rfc3339(), etag=new_etag(name),
                   prediction_output={"outputPath": spec["outputPath"]})
    with emu.store.transaction():
        if jobs.get_job(emu.store, name) is not None:
            raise field_error(AlreadyExists, "job.job_id",
                              "A job with the same name already exists.")
        jobs.put_job(emu.store, job)
        tasks.put(emu.store, emu.tasks.new_task(name, job_work.BATCH_PREDICTION, name, {}))
    emu.tasks.submit(name, job_work.BATCH_PREDICTION)
    return job.to_json()


def get_job(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    jobs.parse_job_name(name)
    auth.authorize(emu, caller, "ml.jobs.get", name)
    job = common.get_job(emu.store, name)
    emu.controls.timing.polled(name)  # a timing rule may wait for N polls (controls/timing.py)
    return job.to_json()


def list_jobs(emu: Emulator, caller: Caller, parent: str, *, filter: str | None = None,
              page_size: int | None = None, page_token: str | None = None) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.jobs.list", parent)
    items = [job.to_json() for job in jobs.list_jobs(emu.store, parent)]
    return listing.list_response(items, "jobs", FILTER_FIELDS, filter=filter, page_size=page_size,
                                 page_token=page_token, sort_key="jobId")


def cancel_job(emu: Emulator, caller: Caller, name: str, body: Any = None) -> dict[str, Any]:
    jobs.parse_job_name(name)
    auth.authorize(emu, caller, "ml.jobs.cancel", name)
    if body not in (None, {}):
        raise InvalidArgument("Invalid JSON payload received. jobs.cancel takes an empty body.")
    with emu.store.transaction():
        job = common.get_job(emu.store, name)
        if job.done:
            raise FailedPrecondition(f"Job {job.job_id} is already in the terminal state "
                                     f"{job.state} and cannot be cancelled.")
        if job.state != "CANCELLING":
            if tasks.get(emu.store, name) is None:  # nothing runs it: it ends here
                job_work.transition(job, "CANCELLED", job_work.CANCELLED_MESSAGE)
            else:  # the process running it stops the pipeline and ends it CANCELLED
                job_work.transition(job, "CANCELLING", job_work.CANCELLING_MESSAGE)
            jobs.put_job(emu.store, job)
    return {}


def patch_job(emu: Emulator, caller: Caller, name: str, body: Any,
              update_mask: str | None) -> dict[str, Any]:
    jobs.parse_job_name(name)
    auth.authorize(emu, caller, "ml.jobs.update", name)
    body = require_object(body, JOB_SCHEMA, "job")
    parse_mask(update_mask, JOB_MASKS)
    labels = body.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise field_error(InvalidArgument, "job.labels", "labels must map strings to strings.")
    with emu.store.transaction():
        job = common.get_job(emu.store, name)
        check_etag(body, job.etag, "job")
        job.labels = dict(labels)
        job.etag = new_etag(name)
        jobs.put_job(emu.store, job)
    return job.to_json()
