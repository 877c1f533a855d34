"""Vertex AI `projects.locations.batchPredictionJobs` over HTTP (google/cloud/aiplatform/v1/
job_service.proto's `google.api.http` options, googleapis/googleapis).

Routes (under /v1/projects/{p}/locations/{l}):
  POST   /batchPredictionJobs             CreateBatchPredictionJob -> BatchPredictionJob
  GET    /batchPredictionJobs             ListBatchPredictionJobs (filter, pageSize, pageToken)
  GET    /batchPredictionJobs/{j}         GetBatchPredictionJob
  POST   /batchPredictionJobs/{j}:cancel  CancelBatchPredictionJob -> {}
  DELETE /batchPredictionJobs/{j}         DeleteBatchPredictionJob -> Operation
"""

from __future__ import annotations

from flask import Response

from api._requests import use_id_converter
from api.vertex_common import LOCATION, blueprint, body, context, list_args, parent
from controlplane.vertex import batch_jobs
from web.google import google_json_response

bp = blueprint("vertex_batch")
use_id_converter(bp)
JOB = LOCATION + "/batchPredictionJobs/<id:job>"


def _name(project: str, location: str, job: str) -> str:
    return f"{parent(project, location)}/batchPredictionJobs/{job}"


@bp.post(LOCATION + "/batchPredictionJobs")
def create(project: str, location: str) -> Response:
    emu, caller = context()
    return google_json_response(batch_jobs.create_batch_prediction_job(
        emu, caller, parent(project, location), body()))


@bp.get(LOCATION + "/batchPredictionJobs")
def list_jobs(project: str, location: str) -> Response:
    emu, caller = context()
    return google_json_response(batch_jobs.list_batch_prediction_jobs(
        emu, caller, parent(project, location), **list_args()))


@bp.get(JOB)
def get(project: str, location: str, job: str) -> Response:
    emu, caller = context()
    return google_json_response(batch_jobs.get_batch_prediction_job(
        emu, caller, _name(project, location, job)))


@bp.post(JOB + ":cancel")
def cancel(project: str, location: str, job: str) -> Response:
    emu, caller = context()
    return google_json_response(batch_jobs.cancel_batch_prediction_job(
        emu, caller, _name(project, location, job)))


@bp.delete(JOB)
def delete(project: str, location: str, job: str) -> Response:
    emu, caller = context()
    return google_json_response(batch_jobs.delete_batch_prediction_job(
        emu, caller, _name(project, location, job)))
