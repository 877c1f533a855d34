"""Error model shared by every surface: google.rpc canonical codes, their HTTP statuses, and the
ApiError hierarchy raised anywhere below the protocol adapters.

Adapters render an ApiError in their own protocol's shape; nothing here knows about Flask.
"""

from __future__ import annotations

import enum
import logging
import re
from typing import Any

log = logging.getLogger("mlemu.errors")

#: Where a message turns into a backtrace: dmlc-core (XGBoost) appends "Stack trace:" and one
#: "[bt] (n) /path/lib.so(+0x..) [0x..]" line per frame; Python's is "Traceback (most recent...".
_NATIVE_TRACE = re.compile(
    r"\s*(?:Stack trace:|\[bt\] \(\d+\)|Traceback \(most recent call last\):).*", re.DOTALL)
#: dmlc's log prefix on a check failure: "[18:34:49] /workspace/src/learner.cc:1289: ".
_DMLC_PREFIX = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+:\d+: ", re.MULTILINE)
#: An absolute file path (at least two components; not part of a URL such as gs://b/x).
_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~-])/(?:[\w.+@-]+/)+([\w.+@-]+)")


def public_text(text: str, *, keep_paths: bool = False) -> str:
    """`text` without what must not leave the process: native stack traces, dmlc log prefixes
    and, unless `keep_paths`, this machine's file paths (each replaced by its file name).

    The full text goes to the server log whenever something was removed, so the operator still
    sees the frames the caller does not.
    """
    public = _DMLC_PREFIX.sub("", _NATIVE_TRACE.sub("", text))
    if not keep_paths:
        public = _ABSOLUTE_PATH.sub(r"\1", public)
    public = public.rstrip()
    if public != text.rstrip():
        log.warning("Error detail as raised (shortened for the caller): %s", text)
    return public


class Code(enum.Enum):
    """google.rpc.Code: (number, HTTP status). Mapping from google/rpc/code.proto."""

    OK = (0, 200)
    CANCELLED = (1, 499)
    UNKNOWN = (2, 500)
    INVALID_ARGUMENT = (3, 400)
    DEADLINE_EXCEEDED = (4, 504)
    NOT_FOUND = (5, 404)
    ALREADY_EXISTS = (6, 409)
    PERMISSION_DENIED = (7, 403)
    RESOURCE_EXHAUSTED = (8, 429)
    FAILED_PRECONDITION = (9, 400)
    ABORTED = (10, 409)
    OUT_OF_RANGE = (11, 400)
    UNIMPLEMENTED = (12, 501)
    INTERNAL = (13, 500)
    UNAVAILABLE = (14, 503)
    DATA_LOSS = (15, 500)
    UNAUTHENTICATED = (16, 401)

    @property
    def number(self) -> int:
        return self.value[0]

    @property
    def http_status(self) -> int:
        return self.value[1]


class ApiError(Exception):
    """An error with a canonical code and a message safe to show the caller."""

    code: Code = Code.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []
        self.headers = headers or {}
        self._http_status = http_status

    @property
    def http_status(self) -> int:
        """The code's HTTP status, unless the error overrides it (e.g. routing's 405)."""
        return self._http_status or self.code.http_status

    def to_google_json(self) -> dict[str, Any]:
        """The Google API error object (https://cloud.google.com/apis/design/errors)."""
        body: dict[str, Any] = {
            "code": self.http_status,
            "message": self.message,
            "status": self.code.name,
        }
        if self.details:
            body["details"] = self.details
        return {"error": body}


def field_violation(field: str, description: str) -> list[dict[str, Any]]:
    """A google.rpc.BadRequest detail, which AI Platform attaches to resource errors."""
    return [
        {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": field, "description": description}],
        }
    ]


class Cancelled(ApiError):
    code = Code.CANCELLED


class InvalidArgument(ApiError):
    code = Code.INVALID_ARGUMENT


class DeadlineExceeded(ApiError):
    code = Code.DEADLINE_EXCEEDED


class NotFound(ApiError):
    code = Code.NOT_FOUND


class ModelNotFound(NotFound):
    """No such model (`version` None) or no such version of it, worded for ml v1; protocols
    with servers of their own (V2, grps, TF Serving) reword it from `model` and `version`."""

    def __init__(self, message: str, *, model: str, version: str | None = None,
                 details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, details=details)
        self.model = model
        self.version = version


class AlreadyExists(ApiError):
    code = Code.ALREADY_EXISTS


class PermissionDenied(ApiError):
    code = Code.PERMISSION_DENIED


class ResourceExhausted(ApiError):
    code = Code.RESOURCE_EXHAUSTED


class FailedPrecondition(ApiError):
    code = Code.FAILED_PRECONDITION


class Aborted(ApiError):
    code = Code.ABORTED


class OutOfRange(ApiError):
    code = Code.OUT_OF_RANGE


class Unimplemented(ApiError):
    code = Code.UNIMPLEMENTED


class Internal(ApiError):
    code = Code.INTERNAL


class Unavailable(ApiError):
    code = Code.UNAVAILABLE


class Unauthenticated(ApiError):
    code = Code.UNAUTHENTICATED


class PredictionFailed(InvalidArgument):
    """The model itself rejected or failed on the input (wrong feature count, bad dtype, ...).

    AI Platform answers these with HTTP 400 and the flat body {"error": "Prediction failed: ..."}
    rather than the Google error object; adapters render `.message` that way.
    """

    def __init__(self, detail: str) -> None:
        # Every framework's failure passes here on its way to any protocol or `app.py predict`,
        # so this is the one place native traces and server paths are taken out.
        detail = public_text(detail)
        super().__init__(f"Prediction failed: {detail}")
        self.detail = detail


class ModelLoadError(ApiError):
    """A version's artifacts could not be turned into a Predictor (bad file, missing class...)."""

    code = Code.FAILED_PRECONDITION

    def __init__(self, message: str) -> None:
        # The paths here are the version's own deploymentUri/packageUris, which the real service
        # names too (gs:// URIs); a native library's backtrace is not.
        super().__init__(public_text(message, keep_paths=True))


_BY_CODE: dict[Code, type[ApiError]] = {
    cls.code: cls
    for cls in (
        Cancelled, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists, PermissionDenied,
        ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal,
        Unavailable, Unauthenticated,
    )
}


def from_code(code: Code, message: str, http_status: int | None = None) -> ApiError:
    """Build the ApiError subclass for a canonical code (used by protocol adapters)."""
    return _BY_CODE.get(code, ApiError)(message, http_status=http_status)
