"""Vertex AI EndpointService: create, get, list, update, delete, deployModel, undeployModel and
mutateDeployedModel (google/cloud/aiplatform/v1/endpoint_service.proto, googleapis/googleapis).

Deploying loads the model in this process through the deployments cache (a model that cannot
load fails the deploy's operation with the reason, as on the service) and records, in one
transaction, the DeployedModel on the endpoint and a DeployedModelRef on the model (which is
what refuses deleting a deployed model). Other processes load it on their first request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import auth
from controlplane.vertex import deferred, listing
from controlplane.vertex.common import (
    get_endpoint_doc,
    optional_object,
    put_endpoint_doc,
    put_model_doc,
    record_operation,
    require_object,
    resolve_model,
    string_list,
)
from core.errors import AlreadyExists, ApiError, FailedPrecondition, InvalidArgument
from core.payloads import Caller
from explainers import vertex_spec
from registry import vertex_resources as vr
from registry import vertex_serving, vertex_traffic
from registry.resources import new_etag, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

ENDPOINT_FIELDS = ("displayName", "description", "labels", "encryptionSpec", "network",
                   "dedicatedEndpointEnabled")
UPDATABLE = ("displayName", "description", "labels", "trafficSplit")
#: What mutateDeployedModel may change (MutateDeployedModelRequest.update_mask).
MUTABLE = ("dedicatedResources", "automaticResources", "disableContainerLogging",
           "enableAccessLogging")
DEPLOY_METADATA = "DeployModelOperationMetadata"
DEPLOYED_FIELDS = ("displayName", "dedicatedResources", "automaticResources", "explanationSpec",
                   "disableExplanations", "serviceAccount", "disableContainerLogging",
                   "enableAccessLogging")


def create_endpoint(emu: Emulator, caller: Caller, parent: str, body: Any,
                    endpoint_id: str | None) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.create", parent)
    body = require_object(body, "Endpoint")
    if not body.get("displayName"):
        raise InvalidArgument("Endpoint.display_name is required.")
    eid = endpoint_id or vr.new_id()
    if not vr.MODEL_ID.match(eid):
        raise InvalidArgument(f"Invalid endpointId {eid!r}.")
    name = f"{parent}/endpoints/{eid}"
    now = now_rfc3339()
    doc = {"name": name, **{k: body[k] for k in ENDPOINT_FIELDS if k in body},
           "deployedModels": [], "trafficSplit": {}, "createTime": now, "updateTime": now,
           "etag": new_etag(name)}
    with emu.store.transaction():
        if emu.store.get(vr.ENDPOINTS, name) is not None:
            raise AlreadyExists(f"Endpoint `{name}` already exists.")
        put_endpoint_doc(emu, doc)
        return record_operation(emu, name, "CreateEndpointOperationMetadata",
                                vr.endpoint_json(doc), "Endpoint")


def get_endpoint(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.get", name)
    return vr.endpoint_json(get_endpoint_doc(emu, name))


def list_endpoints(emu: Emulator, caller: Caller, parent: str, **paging: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.list", parent)
    items = [vr.endpoint_json(doc) for doc in emu.store.children(vr.ENDPOINTS, parent)]
    return listing.list_response(items, "endpoints", **paging)


def update_endpoint(emu: Emulator, caller: Caller, name: str, body: Any,
                    update_mask: str | None) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.update", name)
    body = require_object(body, "Endpoint")
    fields = listing.mask_fields(update_mask, UPDATABLE)
    with emu.store.transaction():
        doc = get_endpoint_doc(emu, name)
        for field in fields:
            if field == "trafficSplit":
                doc["trafficSplit"] = vertex_traffic.replace(
                    optional_object(body.get("trafficSplit"), "trafficSplit"),
                    [dm["id"] for dm in doc["deployedModels"]])
            elif field in body:
                doc[field] = body[field]
            else:
                doc.pop(field, None)
        doc["updateTime"], doc["etag"] = now_rfc3339(), new_etag(name)
        put_endpoint_doc(emu, doc)
        return vr.endpoint_json(doc)


def delete_endpoint(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.delete", name)
    with emu.store.transaction():
        doc = get_endpoint_doc(emu, name)
        if doc["deployedModels"]:
            ids = ", ".join(dm["id"] for dm in doc["deployedModels"])
            raise FailedPrecondition(f"Endpoint `{name}` has deployed models ({ids}). Undeploy "
                                     "them before deleting the endpoint.")
        emu.store.delete(vr.ENDPOINTS, name)
        return record_operation(emu, name.rsplit("/endpoints/", 1)[0], "DeleteOperationMetadata",
                                None)


def _serving_fields(emu: Emulator, model_doc: dict[str, Any], vid: str) -> dict[str, Any]:
    """What the deployments cache needs to load the model version (internal keys)."""
    version = model_doc["versions"][vid]
    fields = vr.serving_fields(version, f"{model_doc['name']}@{vid}",
                               emu.settings.vertex_local_containers)
    return {**fields, "_modelDisplayName": version.get("displayName", ""),
            "_explanationSpec": version.get("explanationSpec")}


def deploy_model(emu: Emulator, caller: Caller, endpoint: str, body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.deploy", endpoint)
    body = require_object(body, "DeployModelRequest")
    wanted = require_object(body.get("deployedModel"), "deployed_model")
    model_name = str(wanted.get("model") or "")
    if not model_name:
        raise InvalidArgument("DeployedModel.model is required.")
    auth.authorize(emu, caller, "aiplatform.models.get", model_name)
    get_endpoint_doc(emu, endpoint)
    model_doc, vid = resolve_model(emu, model_name)
    dm: dict[str, Any] = {
        "id": str(wanted.get("id") or vr.new_id()), "model": model_doc["name"],
        "modelVersionId": vid, **{k: wanted[k] for k in DEPLOYED_FIELDS if k in wanted},
        "createTime": now_rfc3339(), "_uid": vr.new_uid(),
        **_serving_fields(emu, model_doc, vid)}
    dm.setdefault("displayName", model_doc["versions"][vid].get("displayName", ""))
    spec = dm.get("explanationSpec") or dm.get("_explanationSpec")
    if spec and not dm.get("disableExplanations"):
        vertex_spec.check(spec, dm["_framework"])
    split = optional_object(body.get("trafficSplit"), "trafficSplit")
    if deferred.held(emu, deferred.DEPLOY_MODEL):  # a timing rule: the runner deploys it later
        return deferred.start(emu, endpoint, DEPLOY_METADATA, deferred.DEPLOY_MODEL, {
            "endpoint": endpoint, "model": model_name, "deployedModel": dm, "trafficSplit": split})
    try:
        load_deployed(emu, endpoint, dm)
    except ApiError as exc:
        return record_operation(emu, endpoint, DEPLOY_METADATA, None,
                                error={"code": exc.code.number, "message": exc.message})
    with emu.store.transaction():
        return record_operation(emu, endpoint, DEPLOY_METADATA,
                                commit_deploy(emu, endpoint, model_name, dm, split),
                                "DeployModelResponse")


def load_deployed(emu: Emulator, endpoint: str, dm: dict[str, Any]) -> None:
    """Load the deployed model now: a model that cannot serve fails the operation, not the
    first request."""
    emu.deployments.get(vertex_serving.serving_version(endpoint, dm))


def commit_deploy(emu: Emulator, endpoint: str, model_name: str, dm: dict[str, Any],
                  split: dict[str, Any]) -> dict[str, Any]:
    """Record the loaded deployed model on its endpoint and model (in the caller's
    transaction); the DeployModelResponse."""
    doc = get_endpoint_doc(emu, endpoint)
    model_doc, vid = resolve_model(emu, model_name)
    ids = [d["id"] for d in doc["deployedModels"]]
    if dm["id"] in ids:
        raise InvalidArgument(f"Deployed model id {dm['id']} is already used in {endpoint}.")
    doc["trafficSplit"] = vertex_traffic.after_deploy(
        dict(doc.get("trafficSplit") or {}), split, dm["id"], ids)
    doc["deployedModels"].append(dm)
    doc["updateTime"], doc["etag"] = now_rfc3339(), new_etag(endpoint)
    model_doc.setdefault("deployedModels", []).append(
        {"endpoint": endpoint, "deployedModelId": dm["id"], "_versionId": vid})
    put_endpoint_doc(emu, doc)
    put_model_doc(emu, model_doc)
    return {"deployedModel": vr.public(dm)}


def undeploy_model(emu: Emulator, caller: Caller, endpoint: str, body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.undeploy", endpoint)
    body = require_object(body, "UndeployModelRequest")
    deployed_id = str(body.get("deployedModelId") or "")
    with emu.store.transaction():
        doc = get_endpoint_doc(emu, endpoint)
        dm = vr.deployed_model(doc, deployed_id)
        if dm is None:
            raise InvalidArgument(f"Deployed model {deployed_id!r} does not exist in endpoint "
                                  f"{endpoint}.")
        remaining = [d["id"] for d in doc["deployedModels"] if d["id"] != deployed_id]
        doc["trafficSplit"] = vertex_traffic.after_undeploy(
            dict(doc.get("trafficSplit") or {}),
            optional_object(body.get("trafficSplit"), "trafficSplit"), deployed_id, remaining)
        doc["deployedModels"] = [d for d in doc["deployedModels"] if d["id"] != deployed_id]
        doc["updateTime"], doc["etag"] = now_rfc3339(), new_etag(endpoint)
        put_endpoint_doc(emu, doc)
        model_doc = emu.store.get(vr.MODELS, dm["model"])
        if model_doc is not None:
            model_doc["deployedModels"] = [
                ref for ref in model_doc.get("deployedModels", [])
                if not (ref["endpoint"] == endpoint and ref["deployedModelId"] == deployed_id)]
            put_model_doc(emu, model_doc)
        operation = record_operation(emu, endpoint, "UndeployModelOperationMetadata", {},
                                     "UndeployModelResponse")
    emu.deployments.drop(vr.serving_key(endpoint, deployed_id))
    return operation


def mutate_deployed_model(emu: Emulator, caller: Caller, endpoint: str, body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.endpoints.update", endpoint)
    body = require_object(body, "MutateDeployedModelRequest")
    wanted = require_object(body.get("deployedModel"), "deployed_model")
    mask = body.get("updateMask")
    if not isinstance(mask, str):  # a FieldMask as an object: {"paths": [...]}
        mask = ",".join(string_list(optional_object(mask, "updateMask").get("paths"), "paths"))
    fields = listing.mask_fields(mask, MUTABLE)
    with emu.store.transaction():
        doc = get_endpoint_doc(emu, endpoint)
        dm = vr.deployed_model(doc, str(wanted.get("id") or ""))
        if dm is None:
            raise InvalidArgument(f"Deployed model {wanted.get('id')!r} does not exist in "
                                  f"endpoint {endpoint}.")
        for field in fields:
            if field in wanted:
                dm[field] = wanted[field]
            else:
                dm.pop(field, None)
        doc["updateTime"], doc["etag"] = now_rfc3339(), new_etag(endpoint)
        put_endpoint_doc(emu, doc)
        return record_operation(emu, endpoint, "MutateDeployedModelOperationMetadata",
                                {"deployedModel": vr.public(dm)}, "MutateDeployedModelResponse")
