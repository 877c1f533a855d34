"""Vertex AI's management use cases (`aiplatform.googleapis.com/v1`): one function per method,
each taking `(emu, caller, ...)` and starting with `auth.authorize` on a Vertex permission.

Modules: common (names, errors, permissions, recording operations), models (ModelService),
endpoints (EndpointService), operations (google.longrunning.Operations), serving (what a deployed
model is to the deployments cache). The work of every long-running method is done before the
request returns; the operation is recorded done, so polling it (as the SDK does) answers at once.
Nothing here knows about HTTP.
"""
