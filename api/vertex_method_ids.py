"""Vertex AI's REST methods by the names fault rules and the request journal give them
(docs/controls.md): each method's id in Vertex AI's discovery document without its common
prefix `aiplatform.projects.locations.` (the discovery document's method ids, e.g.
`aiplatform.projects.locations.models.upload`, `...endpoints.deployModel`,
`...endpoints.operations.get`: https://aiplatform.googleapis.com/$discovery/rest?version=v1, and
the REST reference, https://cloud.google.com/vertex-ai/docs/reference/rest, which lists the same
methods under the same names). ml v1's ids drop `ml.projects.` the same way (api/controls_hook.py).

The operations of a resource keep the resource's collection (`endpoints.operations.get` is what
the SDK polls after `deployModel`; `operations.get` is a location's own), as the discovery
document names them. Operations served under `/ui/` (where google-cloud-aiplatform's REST
transport polls first) are the same methods.

Prediction (`predict`, `explain`) keeps its short names, which its fault rules already use; the
journal names `rawPredict` the same way.
"""

from __future__ import annotations

#: Flask endpoint (blueprint.view) -> method id, for every view but the operations'.
METHOD_IDS = {
    "vertex_models.upload_model": "models.upload",
    "vertex_models.list_models": "models.list",
    "vertex_models.get_model": "models.get",
    "vertex_models.list_versions": "models.listVersions",
    "vertex_models.update_model": "models.patch",
    "vertex_models.merge_version_aliases": "models.mergeVersionAliases",
    "vertex_models.delete_version": "models.deleteVersion",
    "vertex_models.delete_model": "models.delete",
    "vertex_endpoints.create_endpoint": "endpoints.create",
    "vertex_endpoints.list_endpoints": "endpoints.list",
    "vertex_endpoints.get_endpoint": "endpoints.get",
    "vertex_endpoints.update_endpoint": "endpoints.patch",
    "vertex_endpoints.delete_endpoint": "endpoints.delete",
    "vertex_endpoints.deploy_model": "endpoints.deployModel",
    "vertex_endpoints.undeploy_model": "endpoints.undeployModel",
    "vertex_endpoints.mutate_deployed_model": "endpoints.mutateDeployedModel",
    "vertex_batch.create": "batchPredictionJobs.create",
    "vertex_batch.list_jobs": "batchPredictionJobs.list",
    "vertex_batch.get": "batchPredictionJobs.get",
    "vertex_batch.cancel": "batchPredictionJobs.cancel",
    "vertex_batch.delete": "batchPredictionJobs.delete",
}
#: Prediction views: named here, but their faults apply where the deployed model is resolved
#: (dataplane/vertex.py), so a missing endpoint is still a 404.
PREDICTION_IDS = {"vertex_prediction.predict": "predict",
                  "vertex_prediction.raw_predict": "rawPredict",
                  "vertex_prediction.explain": "explain"}
OPERATIONS = "vertex_operations."
#: The operations blueprint's view keys (api/vertex_operations.py: `{prefix}{scope}_{verb}`) ->
#: the collection their method ids start with.
OPERATION_SCOPES = {"location": "operations", "models": "models.operations",
                    "endpoints": "endpoints.operations"}
OPERATION_VERBS = ("list", "get", "wait", "cancel", "delete")


def vertex_method_id(endpoint: str | None) -> str | None:
    """The method id of a Vertex AI management view (None: not one)."""
    if endpoint is None:
        return None
    if endpoint in METHOD_IDS:
        return METHOD_IDS[endpoint]
    if endpoint.startswith(OPERATIONS):
        key, _, verb = endpoint[len(OPERATIONS):].partition("_")
        for prefix in ("v1", "ui"):
            scope = OPERATION_SCOPES.get(key[len(prefix):]) if key.startswith(prefix) else None
            if scope is not None and verb in OPERATION_VERBS:
                return f"{scope}.{verb}"
    return None
