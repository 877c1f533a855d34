"""ml v1 resources: Model, Version and Operation, as the discovery document defines them.

Python code uses snake_case dataclasses; camelCase exists only in to_json/from_json. Fields the
emulator stores but does not act on (autoScaling, machineType, ...) round-trip through `extra`.
`storage()`/`from_storage()` are the store's internal encoding and are not part of the API.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import secrets
from typing import Any

VERSION_STATES = ("UNKNOWN", "READY", "CREATING", "FAILED", "DELETING", "UPDATING")


def now_rfc3339() -> str:
    """Timestamps as the API writes them: RFC 3339, UTC, with a Z suffix."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds").replace(
        "+00:00", "Z"
    )


def new_etag(seed: str) -> str:
    """An opaque etag in the API's style (base64 of 8 bytes), unique per change."""
    digest = hashlib.sha256(f"{seed}:{secrets.token_hex(8)}".encode()).digest()[:8]
    return base64.b64encode(digest).decode()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclasses.dataclass
class Model:
    name: str
    description: str = ""
    default_version: str | None = None  # short version id
    regions: list[str] = dataclasses.field(default_factory=list)
    online_prediction_logging: bool = False
    online_prediction_console_logging: bool = False
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    etag: str = ""
    create_time: str = ""
    #: Serving-protocol extras from the bootstrap file (e.g. TF Serving version labels).
    serving: dict[str, Any] = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    API_FIELDS = ("description", "regions", "online_prediction_logging",
                  "online_prediction_console_logging", "labels")

    def to_json(self, default_version: Version | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name}
        for field in self.API_FIELDS:
            value = getattr(self, field)
            if value:
                body[_camel(field)] = value
        if default_version is not None:
            body["defaultVersion"] = default_version.to_json(is_default=True)
        body.update(self.extra)
        body["etag"] = self.etag
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any], name: str) -> Model:
        known = {_camel(f): f for f in cls.API_FIELDS}
        kwargs = {known[k]: v for k, v in body.items() if k in known}
        extra = {k: v for k, v in body.items()
                 if k not in known and k not in {"name", "etag", "defaultVersion"}}
        return cls(name=name, extra=extra, **kwargs)

    def storage(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_storage(cls, data: dict[str, Any]) -> Model:
        return cls(**data)


@dataclasses.dataclass
class Version:
    name: str
    deployment_uri: str = ""
    framework: str = ""
    prediction_class: str = ""
    package_uris: list[str] = dataclasses.field(default_factory=list)
    runtime_version: str = ""
    python_version: str = ""
    machine_type: str = ""
    description: str = ""
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    state: str = "CREATING"
    error_message: str = ""
    create_time: str = ""
    last_use_time: str = ""
    etag: str = ""
    #: Identifies this incarnation of the name: deployments reload when it changes.
    uid: str = dataclasses.field(default_factory=lambda: secrets.token_hex(8))
    #: Serving-protocol extras from the bootstrap file (e.g. TF Serving version labels).
    serving: dict[str, Any] = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    API_FIELDS = ("deployment_uri", "framework", "prediction_class", "package_uris",
                  "runtime_version", "python_version", "machine_type", "description", "labels",
                  "state", "error_message", "create_time", "last_use_time")
    #: Output-only fields a client may not set on create.
    OUTPUT_ONLY = ("state", "error_message", "create_time", "last_use_time")

    def to_json(self, is_default: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name}
        for field in self.API_FIELDS:
            value = getattr(self, field)
            if value:
                body[_camel(field)] = value
        if is_default:
            body["isDefault"] = True
        body.update(self.extra)
        body["etag"] = self.etag
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any], name: str) -> Version:
        known = {_camel(f): f for f in cls.API_FIELDS if f not in cls.OUTPUT_ONLY}
        kwargs = {known[k]: v for k, v in body.items() if k in known}
        ignored = {"name", "etag", "isDefault"} | {_camel(f) for f in cls.OUTPUT_ONLY}
        extra = {k: v for k, v in body.items() if k not in known and k not in ignored}
        if kwargs.get("framework"):
            kwargs["framework"] = str(kwargs["framework"]).upper()
        return cls(name=name, extra=extra, **kwargs)

    def storage(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_storage(cls, data: dict[str, Any]) -> Version:
        return cls(**data)


@dataclasses.dataclass
class Operation:
    """google.longrunning.Operation with ml v1 OperationMetadata."""

    name: str
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    done: bool = False
    error: dict[str, Any] | None = None
    response: dict[str, Any] | None = None

    METADATA_TYPE = "type.googleapis.com/google.cloud.ml.v1.OperationMetadata"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self.name,
            "metadata": {"@type": self.METADATA_TYPE, **self.metadata},
        }
        if self.done:
            body["done"] = True
            if self.error is not None:
                body["error"] = self.error
            elif self.response is not None:
                body["response"] = self.response
        return body

    def storage(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_storage(cls, data: dict[str, Any]) -> Operation:
        return cls(**data)
