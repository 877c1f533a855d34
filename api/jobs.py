"""ml v1 `projects.jobs` over HTTP (https://cloud.google.com/ai-platform/prediction/docs/
reference/rest/v1/projects.jobs): batch prediction jobs.

Routes:
  POST  /v1/projects/{project}/jobs                          jobs.create
  GET   /v1/projects/{project}/jobs                          jobs.list (filter, pageSize, pageToken)
  GET   /v1/projects/{project}/jobs/{job}                    jobs.get
  PATCH /v1/projects/{project}/jobs/{job}                    jobs.patch (updateMask: labels)
  POST  /v1/projects/{project}/jobs/{job}:cancel             jobs.cancel -> {}
The IAM methods (getIamPolicy, setIamPolicy, testIamPermissions) are in api/iam.py.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from api._requests import body, context, list_args, use_id_converter
from controlplane import jobs
from web.google import google_json_response

bp = Blueprint("ml_jobs", __name__)
use_id_converter(bp)
COLLECTION = "/v1/projects/<project>/jobs"
RESOURCE = COLLECTION + "/<id:job>"


@bp.post(COLLECTION)
def create_job(project: str) -> Response:
    emu, caller = context()
    return google_json_response(jobs.create_job(emu, caller, f"projects/{project}", body()))


@bp.get(COLLECTION)
def list_jobs(project: str) -> Response:
    emu, caller = context()
    return google_json_response(jobs.list_jobs(emu, caller, f"projects/{project}", **list_args()))


@bp.get(RESOURCE)
def get_job(project: str, job: str) -> Response:
    emu, caller = context()
    return google_json_response(jobs.get_job(emu, caller, f"projects/{project}/jobs/{job}"))


@bp.patch(RESOURCE)
def patch_job(project: str, job: str) -> Response:
    emu, caller = context()
    return google_json_response(jobs.patch_job(emu, caller, f"projects/{project}/jobs/{job}", body(),
                                        request.args.get("updateMask")))


@bp.post(RESOURCE + ":cancel")
def cancel_job(project: str, job: str) -> Response:
    emu, caller = context()
    return google_json_response(jobs.cancel_job(emu, caller, f"projects/{project}/jobs/{job}",
                                         body(required=False)))
