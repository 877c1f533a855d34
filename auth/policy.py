"""IAM policies: the `Policy` resource, who a member string stands for, and which permissions a
caller holds on a resource.

A caller's permissions on a resource are the union of the roles bound to any member matching the
caller in the project's policy (from the IAM config file) and, for a model or one of its versions,
in the model's policy (stored durably in the store's `policies` kind, keyed by the model name).
Model bindings so apply to the model and its versions; project bindings to everything in the
project (google.iam.v1 inheritance). Member kinds (https://cloud.google.com/iam/docs/principals):
`user:`, `serviceAccount:`, `group:` (groups defined in the IAM config, nesting allowed),
`domain:` (every user whose email is in the domain), `allUsers` (anyone, even without
credentials) and `allAuthenticatedUsers` (any verified identity). `deleted:` members are kept
but match no one, as in Google IAM.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any

from core.errors import InvalidArgument
from core.payloads import Caller

KIND = "policies"
#: The etag Google IAM gives a resource that has never had a policy set.
EMPTY_ETAG = "ACAB"
MEMBER_PREFIXES = ("user:", "serviceAccount:", "group:", "domain:", "deleted:")
SPECIAL_MEMBERS = ("allUsers", "allAuthenticatedUsers")


def check_member(member: Any) -> str:
    """`member` if it is a valid IAM principal string (INVALID_ARGUMENT otherwise)."""
    if isinstance(member, str) and (member in SPECIAL_MEMBERS or any(
            member.startswith(p) and len(member) > len(p) for p in MEMBER_PREFIXES)):
        return member
    raise InvalidArgument(f"The member {member} is of an unknown type. Please set a valid type "
                          "prefix for the member.")


def normalize(member: str) -> str:
    """Emails compare case-insensitively; the type prefix keeps its spelling."""
    kind, sep, value = member.partition(":")
    return f"{kind}:{value.lower()}" if sep else member


@dataclasses.dataclass
class Binding:
    role: str
    members: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "members": list(self.members)}


@dataclasses.dataclass
class Policy:
    """google.iam.v1.Policy without conditions (version 1)."""

    bindings: list[Binding] = dataclasses.field(default_factory=list)
    etag: str = EMPTY_ETAG
    audit_configs: list[Any] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.bindings or self.etag != EMPTY_ETAG:
            body["version"] = 1
        if self.audit_configs:
            body["auditConfigs"] = self.audit_configs
        if self.bindings:
            body["bindings"] = [b.to_json() for b in self.bindings]
        body["etag"] = self.etag
        return body


def new_etag() -> str:
    """A fresh policy etag; Google's are 8 bytes starting 0x07 0x05 ("BwX..." in base64)."""
    return base64.b64encode(b"\x07\x05" + os.urandom(6)).decode()


def parse_bindings(raw: Any, known_role: Any, where: str = "policy.bindings") -> list[Binding]:
    """Bindings from their JSON form, validated; `known_role(role)` says if a role exists.

    A role bound twice is merged into one binding, as Google IAM stores it.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidArgument(f"Invalid value at '{where}': bindings must be a list.")
    merged: dict[str, list[str]] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidArgument(f"Invalid value at '{where}[{index}]': a binding must be an "
                                  "object with 'role' and 'members'.")
        unknown = sorted(set(item) - {"role", "members", "condition"})
        if unknown:
            raise InvalidArgument(f'Invalid JSON payload received. Unknown name "{unknown[0]}" at '
                                  f"'{where}[{index}]': Cannot find field.")
        if item.get("condition"):
            raise InvalidArgument("Conditional role bindings are not supported by mlemu; remove "
                                  f"the condition from {where}[{index}].")
        role = item.get("role")
        if not isinstance(role, str) or not role:
            raise InvalidArgument(f"{where}[{index}].role is required.")
        if not known_role(role):
            raise InvalidArgument(f"Role {role} is not supported for this resource.")
        members = item.get("members") or []
        if not isinstance(members, list) or not members:
            raise InvalidArgument(f"{where}[{index}] ({role}) must name at least one member.")
        target = merged.setdefault(role, [])
        for member in members:
            if check_member(member) not in target:
                target.append(member)
    return [Binding(role, members) for role, members in merged.items()]


def policy_from_storage(data: Mapping[str, Any] | None) -> Policy:
    if not data:
        return Policy()
    return Policy(bindings=[Binding(b["role"], list(b["members"])) for b in data.get("bindings", [])],
                  etag=str(data.get("etag") or EMPTY_ETAG),
                  audit_configs=list(data.get("auditConfigs") or []))


def policy_to_storage(policy: Policy) -> dict[str, Any]:
    return {"bindings": [b.to_json() for b in policy.bindings], "etag": policy.etag,
            "auditConfigs": policy.audit_configs}


# --- who matches a member ----------------------------------------------------------------

def expand_groups(groups: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """principal -> every group (transitively) it belongs to, from `group email -> members`."""
    direct: dict[str, set[str]] = {}
    for group, members in groups.items():
        for member in members:
            direct.setdefault(normalize(member), set()).add(normalize(f"group:{group}"))
    closed: dict[str, frozenset[str]] = {}
    for principal, groups_of in direct.items():
        seen: set[str] = set()
        todo = list(groups_of)
        while todo:
            group = todo.pop()
            if group not in seen:
                seen.add(group)
                todo.extend(direct.get(group, ()))
        closed[principal] = frozenset(seen)
    return closed


def matches(member: str, caller: Caller, memberships: Mapping[str, frozenset[str]]) -> bool:
    if member == "allUsers":
        return True
    if caller.principal is None:
        return False
    if member == "allAuthenticatedUsers":
        return caller.authenticated
    member, principal = normalize(member), normalize(caller.principal)
    if member == principal:
        return True
    if member.startswith("group:"):
        return member in memberships.get(principal, ())
    if member.startswith("domain:") and principal.startswith("user:"):
        return principal.rsplit("@", 1)[-1] == member.removeprefix("domain:")
    return False


# --- where a resource's bindings come from -----------------------------------------------

def project_of(resource: str) -> str | None:
    parts = resource.split("/")
    return parts[1] if len(parts) >= 2 and parts[0] == "projects" else None


def job_of(resource: str) -> str | None:
    """`projects/p/jobs/j` for a job name, None for anything else."""
    parts = resource.split("/")
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == "jobs":
        return resource
    return None


def model_of(resource: str) -> str | None:
    """`projects/p/models/m` for a model or version name, None for anything else."""
    parts = resource.split("/")
    if len(parts) >= 4 and parts[0] == "projects" and parts[2] == "models":
        return "/".join(parts[:4])
    return None
