"""Vertex AI's management use cases (`aiplatform.googleapis.com/v1`): one function per method,
each taking `(emu, caller, ...)` and starting with `auth.authorize` on a Vertex permission.

Modules: common (errors, stored documents, recording operations), listing (Vertex's filter,
orderBy and update-mask conventions), models (ModelService), endpoints (EndpointService),
operations (google.longrunning.Operations), batch_jobs (JobService's batch prediction jobs) and
batch_work (what such a job does on the task runner). The work of every other long-running method
is done before the request returns; the operation is recorded done, so polling it (as the SDK
does) answers at once.
Nothing here knows about HTTP.
"""
