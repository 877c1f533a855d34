"""Vertex AI (`aiplatform.googleapis.com/v1`) resources as the store keeps them: a Model with its
versions, an Endpoint with its deployed models, and their long-running operations.

Field names follow google/cloud/aiplatform/v1/{model,endpoint,operation}.proto (googleapis/
googleapis), in the JSON mapping Google's REST front end answers with: camelCase, int64 as
strings, enums as integers (the SDK's REST transport asks for `$alt=json;enum-encoding=int`).
Stored documents carry a few internal keys (prefixed `_`) that `public` strips before a client
sees them.

These are not ml v1's Model/Version (registry/resources.py): a Vertex model lives under
`projects/{p}/locations/{l}/models/{id}` and its versions are numbered `1, 2, ...` with aliases.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from core.errors import FailedPrecondition, InvalidArgument

MODELS = "vertex_models"
ENDPOINTS = "vertex_endpoints"
OPERATIONS = "vertex_operations"
BATCH_JOBS = "vertex_batch_jobs"
TYPE_PREFIX = "type.googleapis.com/google.cloud.aiplatform.v1."

#: google.cloud.aiplatform.v1.Model.DeploymentResourcesType.
DEDICATED_RESOURCES, AUTOMATIC_RESOURCES, SHARED_RESOURCES = 1, 2, 3

#: Vertex AI's prebuilt prediction images (https://cloud.google.com/vertex-ai/docs/predictions/
#: pre-built-containers): REGION-docker.pkg.dev/vertex-ai/prediction/FRAMEWORK-(cpu|gpu).VERSION.
PREBUILT_IMAGE = re.compile(
    r"^(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai/prediction/"
    r"(?P<framework>sklearn|xgboost|tf2|tf)-(?:cpu|gpu)\.[\w.-]+(?::[\w.-]+)?$")
FRAMEWORKS = {"sklearn": "SCIKIT_LEARN", "xgboost": "XGBOOST", "tf2": "TENSORFLOW",
              "tf": "TENSORFLOW"}
#: A user-chosen model id (UploadModelRequest.model_id: "[a-z0-9_-]{1,63}, first character a
#: letter" or all digits) and a version alias (ModelVersion aliases: "[a-z][a-zA-Z0-9-]{0,126}
#: [a-z0-9]").
MODEL_ID = re.compile(r"^(?:[a-z][a-z0-9_-]{0,62}|[0-9]{1,63})$")
ALIAS = re.compile(r"^[a-z](?:[a-zA-Z0-9-]{0,126}[a-z0-9])?$")
LOCATION = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def new_id() -> str:
    """A numeric resource id in the service's style (an int64 as a decimal string)."""
    return str(10**18 + secrets.randbelow(9 * 10**18))


def new_uid() -> str:
    return secrets.token_hex(8)


def location_name(project: str, location: str) -> str:
    if not LOCATION.match(location):
        raise InvalidArgument(f"Invalid location: {location!r}.")
    return f"projects/{project}/locations/{location}"


def framework_of(image_uri: str) -> str | None:
    """The built-in framework a prebuilt image serves (None: a custom container)."""
    match = PREBUILT_IMAGE.match(image_uri or "")
    return FRAMEWORKS[match["framework"]] if match else None


#: The containerSpec.env variable that names a Custom Prediction Routine's class (docs/vertex.md).
ROUTINE_ENV = "MLEMU_PREDICTOR_CLASS"


#: The containerSpec fields a custom container runs with (predictors/container.py).
CONTAINER_FIELDS = ("command", "args", "env", "ports", "predictRoute", "healthRoute")


def serving_fields(version: dict[str, Any], name: str,
                   local_containers: bool = False) -> dict[str, Any]:
    """How a model version is served (internal keys of a deployment or a batch job): a prebuilt
    image's framework, a Custom Prediction Routine named in its containerSpec.env whose
    modules are in its artifactUri, or (`local_containers`: MLEMU_VERTEX_LOCAL_CONTAINERS) its
    containerSpec.command run as a local process; FAILED_PRECONDITION for any other image."""
    spec = version.get("containerSpec") or {}
    image = spec.get("imageUri", "")
    uri = version.get("artifactUri", "")
    framework = framework_of(image)
    if framework is not None:
        return {"_artifactUri": uri, "_framework": framework}
    env = {e.get("name"): e.get("value") for e in spec.get("env") or [] if isinstance(e, dict)}
    routine = env.get(ROUTINE_ENV)
    if routine and uri:
        return {"_artifactUri": uri, "_framework": "", "_predictionClass": str(routine),
                "_packageUris": [uri]}
    if local_containers and spec.get("command"):
        return {"_artifactUri": uri, "_framework": "",
                "_container": {k: spec[k] for k in CONTAINER_FIELDS if k in spec}}
    if local_containers:
        raise FailedPrecondition(
            f"Model {name} uses the custom container image {image} without "
            "containerSpec.command: mlemu runs no images, only a command as a local process "
            "(docs/vertex.md).")
    raise FailedPrecondition(
        f"Model {name} uses the custom container image {image}: mlemu runs no containers. It "
        "serves Vertex AI's prebuilt sklearn, xgboost and tf2 prediction images, Custom "
        f"Prediction Routines named by containerSpec.env {ROUTINE_ENV}, and, with "
        "MLEMU_VERTEX_LOCAL_CONTAINERS=true, a containerSpec.command as a local process for "
        "online prediction (docs/vertex.md).")


def split_versioned(model: str) -> tuple[str, str | None]:
    """`models/ID@VERSION` -> (`models/ID`, VERSION), VERSION a version id or an alias."""
    base, sep, version = model.partition("@")
    return base, (version if sep else None)


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored body without its internal keys."""
    return {k: v for k, v in doc.items() if not k.startswith("_")}


# --- models ---------------------------------------------------------------------------------

def version_of(doc: dict[str, Any], wanted: str | None) -> str | None:
    """The version id `wanted` names in a stored model (an id, an alias, `default`, or None for
    the default version); None when it names none."""
    if wanted is None or wanted == "default":
        return str(doc["defaultVersionId"])
    if wanted in doc["versions"]:
        return wanted
    for vid, version in doc["versions"].items():
        if wanted in version.get("versionAliases", []):
            return str(vid)
    return None


def model_json(doc: dict[str, Any], vid: str) -> dict[str, Any]:
    """One version of a stored model as google.cloud.aiplatform.v1.Model."""
    version = doc["versions"][vid]
    aliases = list(version.get("versionAliases", []))
    if vid == doc["defaultVersionId"]:
        aliases = ["default", *aliases]
    body: dict[str, Any] = {"name": doc["name"], "versionId": vid, "versionAliases": aliases}
    body.update(public(version))
    body["versionAliases"] = aliases
    body["supportedDeploymentResourcesTypes"] = deployment_types(version)
    body["supportedInputStorageFormats"] = ["jsonl", "csv", "tf-record", "tf-record-gzip",
                                            "file-list"]
    body["supportedOutputStorageFormats"] = ["jsonl"]
    refs = [ref for ref in doc.get("deployedModels", []) if ref.get("_versionId") == vid]
    if refs:
        body["deployedModels"] = [public(ref) for ref in refs]
    return body


def deployment_types(version: dict[str, Any]) -> list[int]:
    """What the real service reports: prebuilt images dedicated and shared resources, custom
    containers dedicated only (the SDK builds its DeployModelRequest from this list)."""
    image = version.get("containerSpec", {}).get("imageUri", "")
    return [DEDICATED_RESOURCES, SHARED_RESOURCES] if framework_of(image) else [DEDICATED_RESOURCES]


# --- endpoints ------------------------------------------------------------------------------

def endpoint_json(doc: dict[str, Any]) -> dict[str, Any]:
    body = public(doc)
    body["deployedModels"] = [public(dm) for dm in doc.get("deployedModels", [])]
    if not body["deployedModels"]:
        del body["deployedModels"]
    if not body.get("trafficSplit"):
        body.pop("trafficSplit", None)
    return body


def deployed_model(doc: dict[str, Any], deployed_id: str) -> dict[str, Any] | None:
    for dm in doc.get("deployedModels", []):
        if dm["id"] == deployed_id:
            return dm  # type: ignore[no-any-return]
    return None


def serving_key(endpoint: str, deployed_id: str) -> str:
    """The deployments cache's key for a deployed model (one loaded predictor per deployment)."""
    return f"{endpoint}/deployedModels/{deployed_id}"


def parse_serving_key(key: str) -> tuple[str, str] | None:
    endpoint, sep, deployed_id = key.partition("/deployedModels/")
    if not sep or "/locations/" not in endpoint or "/endpoints/" not in endpoint:
        return None
    return endpoint, deployed_id


# --- operations -----------------------------------------------------------------------------

def operation_json(doc: dict[str, Any]) -> dict[str, Any]:
    return public(doc)


def operation_parent(name: str) -> str:
    """Operations are stored under their location (listing is by location, filtered by prefix
    for the per-resource collections)."""
    return "/".join(name.split("/")[:4])
