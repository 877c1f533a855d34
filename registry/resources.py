"""ml v1 resources: Model, Version and Operation, as the discovery document defines them.

Python code uses snake_case dataclasses; camelCase exists only in to_json/from_json. Fields the
emulator stores but does not act on (autoScaling, machineType, ...) round-trip through `extra`.
`storage()`/`from_storage()` are the store's internal encoding and are not part of the API.
Decoding a stored document is tolerant (`from_stored`): a row written by another layout, with a
field this code does not know or without one it expects, reads with defaults and a warning
instead of making every read of its kind fail.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import hashlib
import logging
import secrets
from typing import Any, TypeVar

log = logging.getLogger("mlemu.store")
T = TypeVar("T")

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


@functools.cache
def _warn_layout(kind: str, unknown: tuple[str, ...], missing: tuple[str, ...]) -> None:
    """Warn once per layout (a store of old rows would otherwise log on every read)."""
    log.warning("stored %s documents of another layout: ignoring unknown field(s) %s, defaulting "
                "missing field(s) %s", kind, ", ".join(unknown) or "-", ", ".join(missing) or "-")


def from_stored(cls: type[T], data: dict[str, Any]) -> T:
    """An instance of the dataclass `cls` from a stored document: unknown fields are dropped,
    missing ones take their defaults (a missing field without a default takes its type's empty
    value), with a warning naming them."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = tuple(sorted(k for k in data if k not in fields))
    missing = tuple(sorted(n for n, f in fields.items() if n not in data and f.init
                           and f.default is dataclasses.MISSING
                           and f.default_factory is dataclasses.MISSING))
    if not unknown and not missing:
        return cls(**data)
    _warn_layout(cls.__name__, unknown, missing)
    kwargs = {k: v for k, v in data.items() if k in fields}
    for name in missing:
        kwargs[name] = _empty(str(fields[name].type))
    return cls(**kwargs)


def _empty(annotation: str) -> Any:
    """The value a required field missing from a stored document takes, by its annotation."""
    for prefix, value in (("dict", {}), ("list", []), ("int", 0), ("float", 0.0), ("bool", False)):
        if annotation.startswith(prefix):
            return value
    return ""


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
        return from_stored(cls, data)


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
    explanation_config: dict[str, Any] = dataclasses.field(default_factory=dict)
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
                  "explanation_config", "state", "error_message", "create_time", "last_use_time")
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
        return from_stored(cls, data)


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
        return from_stored(cls, data)
