"""The ml v1 `Job` resource (batch prediction) and its place in the store.

A job is stored as a JSON document under kind "jobs", keyed by `projects/{p}/jobs/{id}` with the
project as parent, like models. The API's Job has no `name` field (the id is `jobId`); the store
keys by the full name so jobs of different projects never collide. Fields the API defines but
mlemu does not act on (trainingInput, which is refused, jobPosition) are not kept.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from core.errors import InvalidArgument, field_violation
from registry.resources import from_stored
from registry.store_base import Store

KIND = "jobs"
STATES = ("STATE_UNSPECIFIED", "QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "FAILED",
          "CANCELLING", "CANCELLED")
ACTIVE_STATES = ("QUEUED", "PREPARING", "RUNNING", "CANCELLING")
#: gcloud's and the service's rule for job ids: a letter, then letters, digits and underscores
#: (gcloud ai-platform jobs submit: "JOB ... must contain only letters, numbers and underscores,
#: and start with a letter"), 128 characters at most.
JOB_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")
_JOB_NAME = re.compile(r"^projects/([^/]+)/jobs/([^/]+)$")


def job_name(project: str, job_id: str) -> str:
    return f"projects/{project}/jobs/{job_id}"


def parse_job_name(name: str) -> tuple[str, str]:
    match = _JOB_NAME.match(name)
    if not match:
        raise InvalidArgument(f"Invalid job name {name!r}: expected projects/PROJECT/jobs/JOB.")
    return match.group(1), match.group(2)


def check_job_id(value: Any) -> str:
    if not isinstance(value, str) or not JOB_ID_RE.match(value):
        description = ("Job id must start with a letter and contain only letters, numbers and "
                       "underscores, with at most 128 characters.")
        raise InvalidArgument(f"Field: job.job_id Error: {description}",
                              details=field_violation("job.job_id", description))
    return value


@dataclasses.dataclass
class Job:
    name: str
    prediction_input: dict[str, Any]
    state: str = "QUEUED"
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    create_time: str = ""
    start_time: str = ""
    end_time: str = ""
    error_message: str = ""
    etag: str = ""
    #: outputPath, predictionCount, errorCount, nodeHours (int64 counts as JSON strings).
    prediction_output: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def job_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def done(self) -> bool:
        return self.state in ("SUCCEEDED", "FAILED", "CANCELLED")

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"jobId": self.job_id}
        for key, value in (("createTime", self.create_time), ("startTime", self.start_time),
                           ("endTime", self.end_time)):
            if value:
                body[key] = value
        body["state"] = self.state
        if self.error_message:
            body["errorMessage"] = self.error_message
        if self.labels:
            body["labels"] = dict(self.labels)
        body["predictionInput"] = dict(self.prediction_input)
        if self.prediction_output:
            body["predictionOutput"] = dict(self.prediction_output)
        body["etag"] = self.etag
        return body

    def storage(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_storage(cls, data: dict[str, Any]) -> Job:
        return from_stored(cls, data)


def get_job(store: Store, name: str) -> Job | None:
    data = store.get(KIND, name)
    return Job.from_storage(data) if data is not None else None


def list_jobs(store: Store, project_name: str) -> list[Job]:
    return [Job.from_storage(d) for d in store.children(KIND, project_name)]


def put_job(store: Store, job: Job) -> None:
    store.put(KIND, job.name, job.name.rsplit("/jobs/", 1)[0], job.storage())
