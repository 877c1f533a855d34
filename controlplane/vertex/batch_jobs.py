"""Vertex AI JobService's batch prediction jobs: create, get, list, cancel and delete
(google/cloud/aiplatform/v1/job_service.proto and batch_prediction_job.proto, googleapis/
googleapis), on the same Beam pipeline as ml v1 jobs (controlplane/vertex/batch_work.py runs
them on the task runner's long-task threads).

Inputs: `instancesFormat` jsonl, csv, tf-record, tf-record-gzip and file-list from
`gcsSource.uris` (gs:// or local paths under MLEMU_DATA_ROOTS; batch/vertex_inputs.py reads csv
and file-list); BigQuery (`bigquerySource`, `bigqueryDestination`) is refused with UNIMPLEMENTED
saying so. An `instanceConfig` is checked here (batch/vertex_instances.py, `problem`) and
applied by the job's workers. Output: jsonl under
`gcsDestination.outputUriPrefix`/prediction-<model>-<time>/, reported in
`outputInfo.gcsOutputDirectory`. Every framework runs (unlike ml v1's TensorFlow-only batch
prediction).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import auth
from batch import vertex_instances
from batch.spec import CSV_INPUT, FILE_LIST_INPUT
from controlplane.vertex import listing
from controlplane.vertex.common import (
    not_found,
    optional_object,
    record_operation,
    require_object,
    resolve_model,
    string_list,
)
from core.errors import FailedPrecondition, InvalidArgument, Unimplemented
from core.payloads import Caller
from registry import tasks
from registry import vertex_resources as vr
from registry.resources import now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

TASK = "VERTEX_BATCH_PREDICTION"
#: google.cloud.aiplatform.v1.JobState.
QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLING, CANCELLED = 1, 2, 3, 4, 5, 6, 7
DONE = (SUCCEEDED, FAILED, CANCELLED)
#: Vertex instancesFormat -> the pipeline's data format.
FORMATS = {"jsonl": "JSON", "csv": CSV_INPUT, "tf-record": "TF_RECORD",
           "tf-record-gzip": "TF_RECORD_GZIP", "file-list": FILE_LIST_INPUT}
#: The formats a model supports (its supportedInputStorageFormats, registry/vertex_resources.py),
#: as refusals name them.
GCS_FORMATS = ", ".join(FORMATS)
#: Bounds on what a job may ask for: instances per model call, and workers (local runners run
#: at most one per CPU whatever the job asks).
MAX_BATCH_SIZE = 10_000
MAX_REPLICAS = 1_000


def _count(value: Any, default: int, field: str, most: int) -> int:
    """A positive count from the request (int32 fields may come as JSON strings)."""
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"Invalid value at '{field}' (TYPE_INT32), {value!r}") from None
    if not 1 <= number <= most:
        raise InvalidArgument(f"{field} must be from 1 to {most}, got {number}.")
    return number


def _output_dir(prefix: str, display_name: str) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y_%m_%dT%H_%M_%S_%f")[:-3] + "Z"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in display_name) or "model"
    return f"{prefix.rstrip('/')}/prediction-{safe}-{stamp}"


def _check_io(emu: Emulator, body: dict[str, Any], model: str) -> tuple[list[str], str]:
    given = require_object(body.get("inputConfig"), "input_config")
    fmt = str(given.get("instancesFormat") or "")
    if fmt == "bigquery" or given.get("bigquerySource"):
        raise Unimplemented("BigQuery batch prediction input (input_config.bigquery_source, "
                            "instances_format 'bigquery') is not emulated by mlemu: give "
                            f"input_config.gcs_source with instances_format {GCS_FORMATS}.")
    if fmt not in FORMATS:
        # The service's words for a format the model does not list in its
        # supportedInputStorageFormats, as quoted in
        # https://github.com/googleapis/python-aiplatform/issues/467.
        raise InvalidArgument(f'Instance format "{fmt}" is not supported for Model {model}. '
                              f"Supported values are: [{GCS_FORMATS}].")
    uris = string_list(optional_object(given.get("gcsSource"), "gcsSource").get("uris"), "uris")
    if not uris or not all(uris):
        raise InvalidArgument("input_config.gcs_source.uris must name at least one file.")
    config = optional_object(body.get("instanceConfig"), "instanceConfig")
    for field in ("includedFields", "excludedFields"):
        string_list(config.get(field), f"instance_config.{field}")
    why = vertex_instances.problem(config, fmt)
    if why:
        raise InvalidArgument(why)
    out = require_object(body.get("outputConfig"), "output_config")
    written = str(out.get("predictionsFormat") or "jsonl")
    if written == "bigquery" or out.get("bigqueryDestination"):
        raise Unimplemented("BigQuery batch prediction output (output_config."
                            "bigquery_destination, predictions_format 'bigquery') is not emulated "
                            "by mlemu: give output_config.gcs_destination with predictions_format "
                            "jsonl.")
    if written != "jsonl":
        # The model's supportedOutputStorageFormats (registry/vertex_resources.py) is jsonl.
        raise Unimplemented(f"predictions_format {written!r} is not supported by mlemu; it "
                            "writes jsonl, the model's supported output storage format.")
    prefix = str(optional_object(out.get("gcsDestination"), "gcsDestination").get(
        "outputUriPrefix") or "")
    if not prefix:
        raise InvalidArgument("output_config.gcs_destination.output_uri_prefix is required.")
    for uri in uris:
        emu.data_sources.check(uri, "input_config.gcs_source.uris")
    emu.data_sources.check(prefix, "output_config.gcs_destination.output_uri_prefix")
    return uris, prefix


def create_batch_prediction_job(emu: Emulator, caller: Caller, parent: str,
                                body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.batchPredictionJobs.create", parent)
    body = require_object(body, "BatchPredictionJob")
    if not body.get("displayName"):
        raise InvalidArgument("BatchPredictionJob.display_name is required.")
    model_name = str(body.get("model") or "")
    if not model_name:
        raise InvalidArgument("BatchPredictionJob.model is required.")
    auth.authorize(emu, caller, "aiplatform.models.get", model_name)
    model_doc, vid = resolve_model(emu, model_name)
    version = model_doc["versions"][vid]
    serving = vr.serving_fields(version, f"{model_doc['name']}@{vid}")
    _, prefix = _check_io(emu, body, model_doc["name"])
    batch = _count(optional_object(body.get("manualBatchTuningParameters"),
                                   "manualBatchTuningParameters").get("batchSize"), 64,
                   "manual_batch_tuning_parameters.batch_size", MAX_BATCH_SIZE)
    _count(optional_object(body.get("dedicatedResources"), "dedicatedResources").get(
        "maxReplicaCount"), 1,
           "dedicated_resources.max_replica_count", MAX_REPLICAS)
    name = f"{parent}/batchPredictionJobs/{vr.new_id()}"
    now = now_rfc3339()
    keep = ("displayName", "inputConfig", "instanceConfig", "outputConfig", "dedicatedResources",
            "labels", "manualBatchTuningParameters", "modelParameters")
    doc = {"name": name, **{k: body[k] for k in keep if k in body}, "model": model_doc["name"],
           "modelVersionId": vid, "state": PENDING, "createTime": now, "updateTime": now,
           "outputInfo": {"gcsOutputDirectory": _output_dir(prefix, version.get("displayName",
                                                                               ""))},
           **serving, "_batchSize": int(batch)}
    with emu.store.transaction():
        emu.store.put(vr.BATCH_JOBS, name, parent, doc)
        tasks.put(emu.store, emu.tasks.new_task(name, TASK, name, {}))
    emu.tasks.submit(name, TASK)
    return vr.public(doc)


def _get(emu: Emulator, name: str) -> dict[str, Any]:
    doc = emu.store.get(vr.BATCH_JOBS, name)
    if doc is None:
        raise not_found("BatchPredictionJob", name)
    return doc


def get_batch_prediction_job(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.batchPredictionJobs.get", name)
    return vr.public(_get(emu, name))


def list_batch_prediction_jobs(emu: Emulator, caller: Caller, parent: str,
                               **paging: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.batchPredictionJobs.list", parent)
    items = [vr.public(doc) for doc in emu.store.children(vr.BATCH_JOBS, parent)]
    return listing.list_response(items, "batchPredictionJobs", **paging)


def cancel_batch_prediction_job(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.batchPredictionJobs.cancel", name)
    with emu.store.transaction():
        doc = _get(emu, name)
        if doc["state"] in DONE:
            raise FailedPrecondition(f"BatchPredictionJob {name} is already in a final state.")
        doc["state"] = CANCELLED if tasks.get(emu.store, name) is None else CANCELLING
        doc["updateTime"] = now_rfc3339()
        emu.store.put(vr.BATCH_JOBS, name, vr.operation_parent(name), doc)
    return {}


def delete_batch_prediction_job(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.batchPredictionJobs.delete", name)
    with emu.store.transaction():
        doc = _get(emu, name)
        if doc["state"] not in DONE:
            raise FailedPrecondition(f"BatchPredictionJob {name} is still running: cancel it "
                                     "first.")
        emu.store.delete(vr.BATCH_JOBS, name)
        return record_operation(emu, vr.operation_parent(name), "DeleteOperationMetadata", None)
