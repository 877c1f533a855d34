"""Vertex AI ModelService: upload (with `parentModel` for a new version), get (`@VERSION`,
`@ALIAS`), list, listVersions, patch, mergeVersionAliases, deleteVersion and delete.

google/cloud/aiplatform/v1/model_service.proto (googleapis/googleapis) defines the requests;
UploadModel's operation carries UploadModelOperationMetadata and an UploadModelResponse
(`model`, `modelVersionId`); deletes carry DeleteOperationMetadata and Empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import auth
from controlplane.vertex import deferred, listing
from controlplane.vertex.common import (
    get_model_doc,
    optional_object,
    put_model_doc,
    record_operation,
    require_object,
    resolve_model,
    string_list,
)
from core.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from core.payloads import Caller
from explainers import vertex_spec
from registry import artifacts
from registry import vertex_resources as vr
from registry.resources import new_etag, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

#: Model fields a client sets (the rest are output only).
SETTABLE = ("displayName", "description", "versionDescription", "containerSpec", "artifactUri",
            "labels", "explanationSpec", "metadata", "metadataSchemaUri", "predictSchemata")
UPLOAD_METADATA = "UploadModelOperationMetadata"
#: Fields ModelService.UpdateModel accepts in its update mask (snake or camel case).
UPDATABLE = ("displayName", "description", "versionDescription", "labels", "explanationSpec",
             "versionAliases")


def _check_aliases(doc: dict[str, Any] | None, aliases: list[str], vid: str) -> None:
    for alias in aliases:
        if alias == "default":
            continue
        if not isinstance(alias, str) or not vr.ALIAS.match(alias) or alias.isdigit():
            raise InvalidArgument(f"Invalid version alias {alias!r}: an alias must match "
                                  "[a-z][a-zA-Z0-9-]{0,126}[a-z0-9].")
        owner = None if doc is None else vr.version_of(doc, alias)
        if owner is not None and owner != vid:
            raise AlreadyExists(f"Alias {alias} is already used by version {owner} of model "
                                f"{doc['name'] if doc else ''}.")


def _check_container_spec(spec: dict[str, Any]) -> None:
    """ModelContainerSpec's types (google/cloud/aiplatform/v1/model.proto): a command or its
    env is run as given (predictors/container.py), so a malformed one is refused at upload."""
    for field in ("command", "args"):
        string_list(spec.get(field), f"containerSpec.{field}")
    for item in spec.get("env") or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not isinstance(
                item.get("value", ""), str):
            raise InvalidArgument("Invalid JSON payload received. containerSpec.env must be a "
                                  'list of {"name": string, "value": string}.')
    for field in ("predictRoute", "healthRoute"):
        route = spec.get(field, "/")
        if not isinstance(route, str) or not route.startswith("/"):
            raise InvalidArgument(f"containerSpec.{field} must be a path starting with '/'.")


def upload_model(emu: Emulator, caller: Caller, parent: str, body: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.models.upload", parent)
    body = require_object(body, "UploadModelRequest")
    model = require_object(body.get("model"), "model")
    if not model.get("displayName"):
        raise InvalidArgument("Model.display_name is required.")
    spec = optional_object(model.get("containerSpec"), "containerSpec")
    image = spec.get("imageUri", "")
    if not image:
        raise InvalidArgument("Model.container_spec.image_uri is required.")
    _check_container_spec(spec)
    uri = model.get("artifactUri", "")
    if vr.framework_of(image) and not uri:
        raise InvalidArgument(f"Model.artifact_uri is required for the prebuilt image {image}.")
    if uri:
        emu.sources.check(uri, "artifactUri")
        if not artifacts.is_remote(uri):
            artifacts.resolve_model_dir(uri)  # a missing local directory is refused now
    if model.get("explanationSpec"):
        vertex_spec.check(model["explanationSpec"], vr.framework_of(image) or "")
    string_list(model.get("versionAliases"), "versionAliases")  # refused now, not in the operation
    parent_model = vr.split_versioned(str(body["parentModel"]))[0] if body.get("parentModel") \
        else None
    model_id = None if parent_model else str(body.get("modelId") or vr.new_id())
    if model_id is not None and not vr.MODEL_ID.match(model_id):
        raise InvalidArgument(f"Invalid modelId {model_id!r}.")
    if deferred.held(emu, deferred.UPLOAD_MODEL):  # a timing rule: the runner stores it later
        name = parent_model or f"{parent}/models/{model_id}"
        if parent_model is None and emu.store.get(vr.MODELS, name) is not None:
            raise AlreadyExists(f"Model `{name}` already exists.")
        return deferred.start(emu, name, UPLOAD_METADATA, deferred.UPLOAD_MODEL, {
            "parent": parent, "model": model, "parentModel": parent_model, "modelId": model_id})
    with emu.store.transaction():
        response = store_upload(emu, parent, model, parent_model, model_id)
        return record_operation(emu, response["model"], UPLOAD_METADATA, response,
                                "UploadModelResponse")


def store_upload(emu: Emulator, parent: str, model: dict[str, Any], parent_model: str | None,
                 model_id: str | None) -> dict[str, Any]:
    """Store the uploaded model (a new one, or a new version of `parent_model`) in the caller's
    transaction; the UploadModelResponse."""
    aliases = string_list(model.get("versionAliases"), "versionAliases")
    now = now_rfc3339()
    version = {k: model[k] for k in SETTABLE if k in model}
    version.update(createTime=now, updateTime=now, versionCreateTime=now, versionUpdateTime=now)
    if parent_model is not None:
        name = parent_model
        if not name.startswith(parent + "/models/"):
            raise InvalidArgument(f"parentModel {name} is not in {parent}.")
        doc = get_model_doc(emu, name)
        vid = str(doc["nextVersionId"])
        doc["nextVersionId"] += 1
        version["createTime"] = doc["createTime"]
    else:
        name = f"{parent}/models/{model_id}"
        if emu.store.get(vr.MODELS, name) is not None:
            raise AlreadyExists(f"Model `{name}` already exists.")
        doc = {"name": name, "createTime": now, "defaultVersionId": "1", "nextVersionId": 2,
               "versions": {}, "deployedModels": []}
        vid = "1"
    _check_aliases(doc, aliases, vid)
    version["versionAliases"] = [a for a in aliases if a != "default"]
    version["etag"] = new_etag(name)
    doc["versions"][vid] = version
    if "default" in aliases:
        doc["defaultVersionId"] = vid
    put_model_doc(emu, doc)
    return {"model": name, "modelVersionId": vid}


def get_model(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.models.get", name)
    doc, vid = resolve_model(emu, name)
    return vr.model_json(doc, vid)


def list_models(emu: Emulator, caller: Caller, parent: str, **paging: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.models.list", parent)
    items = [vr.model_json(doc, str(doc["defaultVersionId"]))
             for doc in emu.store.children(vr.MODELS, parent)]
    return listing.list_response(items, "models", **paging)


def list_model_versions(emu: Emulator, caller: Caller, name: str, **paging: Any) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.models.list", name)
    doc = get_model_doc(emu, vr.split_versioned(name)[0])
    items = [vr.model_json(doc, vid) for vid in sorted(doc["versions"], key=int)]
    return listing.list_response(items, "models", key="versionId", **paging)


def update_model(emu: Emulator, caller: Caller, name: str, body: Any,
                 update_mask: str | None) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.models.update", name)
    body = require_object(body, "Model")
    fields = listing.mask_fields(update_mask, UPDATABLE)
    with emu.store.transaction():
        doc, vid = resolve_model(emu, name)
        version = doc["versions"][vid]
        for field in fields:
            if field == "versionAliases":
                aliases = string_list(body.get("versionAliases"), "versionAliases")
                _check_aliases(doc, aliases, vid)
                if "default" in aliases:
                    doc["defaultVersionId"] = vid
                version["versionAliases"] = [a for a in aliases if a != "default"]
            elif field in body:
                version[field] = body[field]
            else:
                version.pop(field, None)
        version["updateTime"] = version["versionUpdateTime"] = now_rfc3339()
        version["etag"] = new_etag(name)
        put_model_doc(emu, doc)
        return vr.model_json(doc, vid)


def merge_version_aliases(emu: Emulator, caller: Caller, name: str, body: Any) -> dict[str, Any]:
    """`alias` adds, `-alias` removes (MergeVersionAliasesRequest.version_aliases)."""
    auth.authorize(emu, caller, "aiplatform.models.update", name)
    changes = string_list(require_object(body, "MergeVersionAliasesRequest").get(
        "versionAliases"), "versionAliases")
    if not changes:
        raise InvalidArgument("MergeVersionAliasesRequest.version_aliases must not be empty.")
    with emu.store.transaction():
        doc, vid = resolve_model(emu, name)
        aliases = list(doc["versions"][vid].get("versionAliases", []))
        for change in changes:
            alias = str(change)
            if alias.startswith("-"):
                if alias[1:] == "default":
                    raise InvalidArgument("The default alias cannot be removed; make another "
                                          "version the default instead.")
                aliases = [a for a in aliases if a != alias[1:]]
            elif alias == "default":
                doc["defaultVersionId"] = vid
            elif alias not in aliases:
                _check_aliases(doc, [alias], vid)
                aliases.append(alias)
        doc["versions"][vid]["versionAliases"] = aliases
        doc["versions"][vid]["versionUpdateTime"] = now_rfc3339()
        put_model_doc(emu, doc)
        return vr.model_json(doc, vid)


def _deployed(doc: dict[str, Any], vid: str | None) -> list[str]:
    return [ref["endpoint"] for ref in doc.get("deployedModels", [])
            if vid is None or ref.get("_versionId") == vid]


def delete_model_version(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.models.delete", name)
    if "@" not in name:
        raise InvalidArgument("deleteVersion needs a versioned name: models/ID@VERSION.")
    with emu.store.transaction():
        doc, vid = resolve_model(emu, name)
        if vid == doc["defaultVersionId"]:
            raise FailedPrecondition(
                f"Version {vid} is the default version of model {doc['name']}: make another "
                "version the default (or delete the model) first.")
        endpoints = _deployed(doc, vid)
        if endpoints:
            raise FailedPrecondition(f"Model version {doc['name']}@{vid} is deployed at "
                                     f"endpoint(s): {', '.join(sorted(set(endpoints)))}.")
        del doc["versions"][vid]
        put_model_doc(emu, doc)
        return record_operation(emu, doc["name"].rsplit("/models/", 1)[0],
                                "DeleteOperationMetadata", None)


def delete_model(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "aiplatform.models.delete", name)
    if "@" in name:
        raise InvalidArgument("Delete a version with deleteVersion; delete takes models/ID.")
    with emu.store.transaction():
        doc = get_model_doc(emu, name)
        endpoints = _deployed(doc, None)
        if endpoints:
            # The service refuses as well: a model is undeployed from every endpoint first.
            raise FailedPrecondition(
                f"The model `{name}` is deployed or being deployed at the following "
                f"endpoint(s): {', '.join(sorted(set(endpoints)))}. Undeploy it first.")
        emu.store.delete(vr.MODELS, name)
        return record_operation(emu, name.rsplit("/models/", 1)[0], "DeleteOperationMetadata",
                                None)
