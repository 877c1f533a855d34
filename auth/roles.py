"""Predefined IAM roles as data: role name -> the permissions it grants (the `ml.*` part, and
Vertex AI's `aiplatform.*` permissions that mlemu checks).

Sources (the real lists, as Google publishes them):
- https://cloud.google.com/iam/docs/roles-permissions/ml (roles/ml.*), mirrored as JSON per role in
  github.com/iann0036/iam-dataset gcp/roles/ml.{admin,editor,developer,viewer,modelOwner,
  modelUser,operationOwner,jobOwner}.json;
- the basic roles' `ml.*` permissions from the same dataset (gcp/roles/{viewer,editor}.json);
  https://cloud.google.com/ai-platform/prediction/docs/access-control says the same in words:
  "The legacy project Viewer role grants the same permissions as the AI Platform Prediction
  Viewer role, plus access to send online prediction requests", and Editor is AI Platform Admin
  without the setIamPolicy permissions (Editor cannot change access). Owner holds everything.

Only the `ml.*` and `resourcemanager.projects.*` permissions matter to mlemu; the basic roles'
thousands of other permissions are left out. Custom roles come from the IAM config file.
"""

from __future__ import annotations

from collections.abc import Mapping

_JOBS = ("ml.jobs.cancel", "ml.jobs.create", "ml.jobs.get", "ml.jobs.getIamPolicy", "ml.jobs.list",
         "ml.jobs.setIamPolicy", "ml.jobs.update")
_LOCATIONS = ("ml.locations.get", "ml.locations.list")
_MODELS = ("ml.models.create", "ml.models.delete", "ml.models.get", "ml.models.getIamPolicy",
           "ml.models.list", "ml.models.predict", "ml.models.setIamPolicy", "ml.models.update")
_OPERATIONS = ("ml.operations.cancel", "ml.operations.get", "ml.operations.list")
_STUDIES = ("ml.studies.create", "ml.studies.delete", "ml.studies.get", "ml.studies.getIamPolicy",
            "ml.studies.list", "ml.studies.setIamPolicy")
_TRIALS = ("ml.trials.create", "ml.trials.delete", "ml.trials.get", "ml.trials.list",
           "ml.trials.update")
_VERSIONS = ("ml.versions.create", "ml.versions.delete", "ml.versions.get", "ml.versions.list",
             "ml.versions.predict", "ml.versions.update")
_PROJECT = frozenset({"resourcemanager.projects.get", "resourcemanager.projects.list"})

#: Every ml.* permission (roles/ml.admin's list).
ML_PERMISSIONS = frozenset((*_JOBS, *_LOCATIONS, *_MODELS, *_OPERATIONS, "ml.projects.getConfig",
                            *_STUDIES, *_TRIALS, *_VERSIONS))
_SET_IAM = frozenset(p for p in ML_PERMISSIONS if p.endswith(".setIamPolicy"))

_VIEWER = frozenset({
    "ml.jobs.get", "ml.jobs.list", "ml.locations.get", "ml.locations.list", "ml.models.get",
    "ml.models.list", "ml.operations.get", "ml.operations.list", "ml.projects.getConfig",
    "ml.studies.get", "ml.studies.getIamPolicy", "ml.studies.list", "ml.trials.get",
    "ml.trials.list", "ml.versions.get", "ml.versions.list", "resourcemanager.projects.get",
})

#: Vertex AI's permissions that mlemu checks, and its predefined roles' share of them
#: (https://cloud.google.com/vertex-ai/docs/general/access-control: Vertex AI Administrator has
#: every aiplatform.* permission, Vertex AI User uses every resource (upload, deploy, predict),
#: Vertex AI Viewer reads).
_VERTEX_READ = frozenset({
    "aiplatform.batchPredictionJobs.get", "aiplatform.batchPredictionJobs.list",
    "aiplatform.endpoints.get", "aiplatform.endpoints.list", "aiplatform.models.get",
    "aiplatform.models.list", "aiplatform.operations.get", "aiplatform.operations.list",
})
VERTEX_PERMISSIONS = _VERTEX_READ | {
    "aiplatform.batchPredictionJobs.cancel", "aiplatform.batchPredictionJobs.create",
    "aiplatform.batchPredictionJobs.delete",
    "aiplatform.endpoints.create", "aiplatform.endpoints.delete", "aiplatform.endpoints.deploy",
    "aiplatform.endpoints.explain", "aiplatform.endpoints.predict", "aiplatform.endpoints.undeploy",
    "aiplatform.endpoints.update", "aiplatform.models.delete", "aiplatform.models.update",
    "aiplatform.models.upload", "aiplatform.operations.cancel", "aiplatform.operations.delete",
}

PREDEFINED: Mapping[str, frozenset[str]] = {
    "roles/aiplatform.admin": VERTEX_PERMISSIONS | _PROJECT,
    "roles/aiplatform.user": VERTEX_PERMISSIONS | _PROJECT,
    "roles/aiplatform.viewer": _VERTEX_READ | _PROJECT,
    "roles/ml.admin": ML_PERMISSIONS | _PROJECT,
    "roles/ml.editor": (ML_PERMISSIONS - _SET_IAM) | _PROJECT,
    # No version create/update/delete and no model update/delete: developers deploy through
    # models they own (the creator of a model becomes its roles/ml.modelOwner).
    "roles/ml.developer": frozenset({
        "ml.jobs.create", "ml.jobs.get", "ml.jobs.getIamPolicy", "ml.jobs.list",
        *_LOCATIONS, "ml.models.create", "ml.models.get", "ml.models.getIamPolicy",
        "ml.models.list", "ml.models.predict", "ml.operations.get", "ml.operations.list",
        "ml.projects.getConfig", *_STUDIES, *_TRIALS, "ml.versions.get", "ml.versions.list",
        "ml.versions.predict", "resourcemanager.projects.get",
    }),
    "roles/ml.viewer": _VIEWER,  # read-only: no predict
    "roles/ml.modelOwner": frozenset((*_MODELS, *_VERSIONS)),
    "roles/ml.modelUser": frozenset({"ml.models.get", "ml.models.predict", "ml.versions.get",
                                     "ml.versions.list", "ml.versions.predict"}),
    "roles/ml.operationOwner": frozenset(_OPERATIONS),
    "roles/ml.jobOwner": frozenset(_JOBS),
    # Basic roles, ml.* part. Viewer reads and sends online predictions.
    "roles/viewer": _VIEWER | _VERTEX_READ | {"ml.jobs.getIamPolicy", "ml.models.getIamPolicy",
                                              "ml.models.predict", "ml.versions.predict"},
    "roles/editor": (ML_PERMISSIONS - _SET_IAM) | VERTEX_PERMISSIONS | _PROJECT,
    "roles/owner": ML_PERMISSIONS | VERTEX_PERMISSIONS | _PROJECT | {"mlemu.admin"},
    # Not a Google role: the emulator's own controls (/_mlemu/, docs/controls.md).
    "roles/mlemu.admin": frozenset({"mlemu.admin"}),
}

#: Every permission some predefined role grants: what testIamPermissions can ever answer.
KNOWN_PERMISSIONS = frozenset().union(*PREDEFINED.values())


def permissions(role: str, custom: Mapping[str, frozenset[str]] | None = None) -> frozenset[str]:
    """The permissions `role` grants (empty for an unknown role)."""
    found = PREDEFINED.get(role)
    if found is None and custom is not None:
        found = custom.get(role)
    return found or frozenset()


def is_known(role: str, custom: Mapping[str, frozenset[str]] | None = None) -> bool:
    return role in PREDEFINED or (custom is not None and role in custom)
