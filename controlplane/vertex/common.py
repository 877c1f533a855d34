"""What Vertex AI's use cases share: their errors in the service's words, the stored documents'
lookups, and the recording of long-running operations with their real metadata and response
`@type`s (google/cloud/aiplatform/v1/*_service.proto, `google.longrunning.operation_info`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.errors import InvalidArgument, NotFound
from registry import vertex_resources as vr
from registry.resources import now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator


def not_found(kind: str, name: str) -> NotFound:
    # The service's wording (googleapis/python-genai#1706 quotes a real answer: "Endpoint
    # `projects/.../endpoints/...` not found.").
    return NotFound(f"{kind} `{name}` not found.")


def require_object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidArgument(f"Invalid JSON payload received. {what} must be a JSON object.")
    return body


def optional_object(value: Any, what: str) -> dict[str, Any]:
    """A JSON object field that may be absent ({}); anything else than an object is refused."""
    if value is None:
        return {}
    return require_object(value, what)


def string_list(value: Any, what: str) -> list[str]:
    """A repeated string field (absent: [])."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"Invalid JSON payload received. {what} must be a list of strings.")
    return list(value)


def get_model_doc(emu: Emulator, name: str) -> dict[str, Any]:
    doc = emu.store.get(vr.MODELS, name)
    if doc is None:
        raise not_found("Model", name)
    return doc


def get_endpoint_doc(emu: Emulator, name: str) -> dict[str, Any]:
    doc = emu.store.get(vr.ENDPOINTS, name)
    if doc is None:
        raise not_found("Endpoint", name)
    return doc


def put_model_doc(emu: Emulator, doc: dict[str, Any]) -> None:
    emu.store.put(vr.MODELS, doc["name"], doc["name"].rsplit("/models/", 1)[0], doc)


def put_endpoint_doc(emu: Emulator, doc: dict[str, Any]) -> None:
    emu.store.put(vr.ENDPOINTS, doc["name"], doc["name"].rsplit("/endpoints/", 1)[0], doc)


def resolve_model(emu: Emulator, name: str) -> tuple[dict[str, Any], str]:
    """A stored model and the version id `name` names (`models/ID`, `@VERSION`, `@ALIAS`)."""
    base, wanted = vr.split_versioned(name)
    doc = get_model_doc(emu, base)
    vid = vr.version_of(doc, wanted)
    if vid is None:
        raise not_found("Model", name)
    return doc, vid


def record_operation(emu: Emulator, parent: str, metadata_type: str,
                     response: dict[str, Any] | None, response_type: str = "",
                     error: dict[str, Any] | None = None) -> dict[str, Any]:
    """Store a finished operation under `parent` (a resource or a location) and return it.

    The work it reports is already done: each method does it within its request, so the
    operation is done from the start (DeleteOperationMetadata, ...: `genericMetadata`)."""
    now = now_rfc3339()
    name = f"{parent}/operations/{vr.new_id()}"
    doc: dict[str, Any] = {
        "name": name,
        "metadata": {"@type": vr.TYPE_PREFIX + metadata_type,
                     "genericMetadata": {"createTime": now, "updateTime": now}},
        "done": True,
    }
    if error is not None:
        doc["error"] = error
    else:
        doc["response"] = ({"@type": "type.googleapis.com/google.protobuf.Empty"}
                           if response is None else
                           {"@type": vr.TYPE_PREFIX + response_type, **response})
    emu.store.put(vr.OPERATIONS, name, vr.operation_parent(name), doc)
    return vr.operation_json(doc)
