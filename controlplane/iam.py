"""ml v1 IAM methods on models and jobs: `projects.models.getIamPolicy`, `setIamPolicy`,
`testIamPermissions` and the same three on `projects.jobs` (google.iam.v1 IAMPolicy semantics,
https://cloud.google.com/iam/docs/reference/rest/v1/Policy). The permissions are the resource
kind's own: `ml.models.getIamPolicy` on a model, `ml.jobs.getIamPolicy` on a job, and so on.

- getIamPolicy needs `ml.models.getIamPolicy`; a model without a policy answers the empty policy
  (`{"etag": "ACAB"}`), as the discovery document says.
- setIamPolicy needs `ml.models.setIamPolicy` and replaces the policy (`updateMask` defaults to
  `bindings,etag`). An `etag` that is not the current one is 409 ABORTED with Google IAM's
  message, so read-modify-write cycles cannot lose a concurrent change. Conditions are refused.
- testIamPermissions needs no permission: it answers the subset of the asked permissions the
  caller holds on the model (whether or not it exists, so it reveals nothing either).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import auth
from controlplane import common
from core.errors import Aborted, InvalidArgument
from core.payloads import Caller
from registry import jobs, names

if TYPE_CHECKING:
    from emulator import Emulator

CONCURRENT_CHANGE = ("There were concurrent policy changes. Please retry the whole "
                     "read-modify-write with exponential backoff.")
_MASK_PATHS = {"bindings": "bindings", "etag": "etag", "auditConfigs": "auditConfigs",
               "audit_configs": "auditConfigs", "version": "version"}
_POLICY_FIELDS = {"version", "bindings", "etag", "auditConfigs"}
_PERMISSION = re.compile(r"[a-z][a-z0-9]*(\.[A-Za-z][A-Za-z0-9]*){2}")


def _check_version(version: Any, where: str) -> None:
    if version not in (None, 0, 1, 3):
        raise InvalidArgument(f"Invalid value at '{where}' ({version!r}): valid policy versions "
                              "are 0, 1 and 3.")


def _kind(resource: str) -> str:
    """"jobs" or "models": which resource a policy method names (INVALID_ARGUMENT otherwise)."""
    if auth.job_of(resource) is not None:
        jobs.parse_job_name(resource)
        return "jobs"
    names.parse_model_name(resource)
    return "models"


def _require(emu: Emulator, resource: str, kind: str) -> None:
    if kind == "jobs":
        common.get_job(emu.store, resource)
    else:
        common.get_model(emu.store, resource)


def get_iam_policy(emu: Emulator, caller: Caller, resource: str,
                   requested_version: int | None = None) -> dict[str, Any]:
    kind = _kind(resource)
    auth.authorize(emu, caller, f"ml.{kind}.getIamPolicy", resource)
    _check_version(requested_version, "options.requested_policy_version")
    _require(emu, resource, kind)
    return auth.get_policy(emu, resource).to_json()


def _policy_body(body: Any) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(body, dict):
        raise InvalidArgument("Invalid JSON payload received. The request must be a JSON object "
                              'like {"policy": {...}}.')
    for key in body:
        if key not in ("policy", "updateMask"):
            raise InvalidArgument(f'Invalid JSON payload received. Unknown name "{key}": Cannot '
                                  "find field.")
    policy = body.get("policy")
    if not isinstance(policy, dict):
        raise InvalidArgument("policy is required: send {\"policy\": {\"bindings\": [...], "
                              "\"etag\": \"...\"}}.")
    for key in policy:
        if key not in _POLICY_FIELDS:
            raise InvalidArgument(f'Invalid JSON payload received. Unknown name "{key}" at '
                                  "'policy': Cannot find field.")
    _check_version(policy.get("version"), "policy.version")
    mask = body.get("updateMask") or "bindings,etag"
    if not isinstance(mask, str):
        raise InvalidArgument("updateMask must be a comma-separated string of field paths.")
    paths = []
    for path in (p.strip() for p in mask.split(",") if p.strip()):
        if path not in _MASK_PATHS:
            raise InvalidArgument(f"The update mask path {path!r} is not supported. Supported: "
                                  "bindings, etag, auditConfigs.")
        paths.append(_MASK_PATHS[path])
    return policy, paths


def set_iam_policy(emu: Emulator, caller: Caller, resource: str, body: Any) -> dict[str, Any]:
    kind = _kind(resource)
    auth.authorize(emu, caller, f"ml.{kind}.setIamPolicy", resource)
    requested, paths = _policy_body(body)
    bindings = auth.parse_bindings(requested.get("bindings"), lambda r: auth.is_role(emu, r))
    audit = requested.get("auditConfigs") or []
    if not isinstance(audit, list) or not all(isinstance(a, dict) for a in audit):
        raise InvalidArgument("policy.auditConfigs must be a list of AuditConfig objects.")
    etag = requested.get("etag")
    if etag is not None and not isinstance(etag, str):
        raise InvalidArgument("policy.etag must be a string (base64).")
    with emu.store.transaction():
        _require(emu, resource, kind)
        current = auth.get_policy(emu, resource)
        if etag and etag != current.etag:
            raise Aborted(f"{CONCURRENT_CHANGE} The request's ETag '{etag}' did not match the "
                          f"current policy's ETag '{current.etag}'.")
        updated = auth.Policy(
            bindings=bindings if "bindings" in paths else current.bindings,
            etag=auth.new_etag(),
            audit_configs=audit if "auditConfigs" in paths else current.audit_configs,
        )
        auth.put_policy(emu, resource, updated)
    return updated.to_json()


def test_iam_permissions(emu: Emulator, caller: Caller, resource: str, body: Any) -> dict[str, Any]:
    _kind(resource)
    if not isinstance(body, dict) or set(body) - {"permissions"}:
        raise InvalidArgument('Invalid JSON payload received. Expected {"permissions": [...]}.')
    wanted = body.get("permissions") or []
    if not isinstance(wanted, list) or not all(isinstance(p, str) for p in wanted):
        raise InvalidArgument("permissions must be a list of strings.")
    for permission in wanted:
        if "*" in permission:
            raise InvalidArgument("Permissions with wildcards (such as '*' or 'ml.*') are not "
                                  "allowed in testIamPermissions requests.")
        if not _PERMISSION.fullmatch(permission):
            raise InvalidArgument(f"Permission {permission} is not valid.")
    held = auth.held_permissions(emu, caller, resource, wanted)
    return {"permissions": held} if held else {}
