"""The IAM configuration file (MLEMU_IAM_CONFIG, YAML): who can sign in, groups, custom roles and
the project-level policies. Documented in docs/iam.md; relative paths are relative to it.

    audiences: [https://mlemu.example.com/]      # more accepted JWT audiences
    principalHeader: X-Mlemu-Principal           # trusted principal header (off unless set)
    serviceAccounts:                             # self-signed JWTs of these accounts
      - keyFile: keys/deployer.json              #   key file: account and key id inside
      - email: reader@my-project.iam.gserviceaccount.com
        certFile: keys/reader.pem                #   PEM, {kid: PEM} map or JWK set
    idTokens:                                    # Google-signed ID tokens
      certsUrl: https://www.googleapis.com/oauth2/v1/certs   # or certsFile: certs.json
      audiences: [https://mlemu-abc-uc.a.run.app]
    staticTokens: {dev-token: user:ann@example.com}
    groups: {ml-team@example.com: [user:ann@example.com, group:interns@example.com]}
    customRoles: {projects/my-project/roles/predictor: [ml.models.predict, ml.versions.predict]}
    projects:
      my-project:
        bindings:
          - {role: roles/ml.developer, members: [group:ml-team@example.com]}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from auth import keys, roles
from auth.policy import Binding, check_member, expand_groups, parse_bindings
from core.errors import ApiError

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
_TOP_KEYS = {"audiences", "principalHeader", "serviceAccounts", "idTokens", "staticTokens",
             "groups", "customRoles", "projects"}


class IamConfigError(ValueError):
    """The IAM config file is malformed (the message names the file and the entry)."""


@dataclasses.dataclass(frozen=True)
class IdTokenConfig:
    certs: keys.CertsUrl | dict[str, str]
    audiences: tuple[str, ...]
    issuers: tuple[str, ...] = GOOGLE_ISSUERS


@dataclasses.dataclass(frozen=True)
class IamConfig:
    """Everything the IAM checks need besides the store. Empty (nobody, nothing) by default."""

    audiences: tuple[str, ...] = ()
    principal_header: str | None = None
    #: service account email (lower case) -> {key id: PEM}
    service_accounts: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    id_tokens: IdTokenConfig | None = None
    static_tokens: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: principal -> every group it belongs to (transitively)
    memberships: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    custom_roles: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    project_bindings: Mapping[str, tuple[Binding, ...]] = dataclasses.field(default_factory=dict)
    #: JWTs this process has verified, until their `exp`.
    verified: keys.TokenCache = dataclasses.field(default_factory=keys.TokenCache, compare=False,
                                                  repr=False)

    def role_permissions(self, role: str) -> frozenset[str]:
        return roles.permissions(role, self.custom_roles)

    def is_role(self, role: str) -> bool:
        return roles.is_known(role, self.custom_roles)


def _mapping(where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise IamConfigError(f"{where}: expected a mapping, got {type(value).__name__}.")
    return value


def _strings(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise IamConfigError(f"{where}: expected a list of strings.")
    return tuple(value)


def _service_accounts(where: str, raw: Any, base: Path) -> dict[str, dict[str, str]]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise IamConfigError(f"{where}: expected a list of accounts.")
    accounts: dict[str, dict[str, str]] = {}
    for index, entry in enumerate(raw):
        here = f"{where}[{index}]"
        entry = _mapping(here, entry)
        unknown = sorted(set(entry) - {"email", "keyFile", "certFile", "keyId"})
        if unknown or ("keyFile" in entry) == ("certFile" in entry):
            raise IamConfigError(f"{here}: give exactly one of keyFile or certFile (plus email and "
                                 "keyId for a certFile); unknown keys: " + ", ".join(unknown))
        if "keyFile" in entry:
            email, certs = keys.load_key_file(base / str(entry["keyFile"]))
            email = str(entry.get("email") or email)
        else:
            if not entry.get("email"):
                raise IamConfigError(f"{here}: a certFile needs the account's email.")
            email = str(entry["email"])
            certs = keys.load_cert_file(base / str(entry["certFile"]), entry.get("keyId"))
        accounts.setdefault(email.lower(), {}).update(certs)
    return accounts


def _id_tokens(where: str, raw: Any, base: Path) -> IdTokenConfig | None:
    if raw is None:
        return None
    raw = _mapping(where, raw)
    unknown = sorted(set(raw) - {"certsUrl", "certsFile", "audiences", "issuers"})
    if unknown or ("certsUrl" in raw and "certsFile" in raw):
        raise IamConfigError(f"{where}: give certsUrl or certsFile (not both); allowed keys: "
                             "certsUrl, certsFile, audiences, issuers.")
    certs: keys.CertsUrl | dict[str, str]
    if "certsFile" in raw:
        certs = keys.load_cert_file(base / str(raw["certsFile"]))
    else:
        certs = keys.CertsUrl(str(raw.get("certsUrl") or GOOGLE_CERTS_URL))
    return IdTokenConfig(certs, _strings(f"{where}.audiences", raw.get("audiences")),
                         _strings(f"{where}.issuers", raw.get("issuers")) or GOOGLE_ISSUERS)


def _principal(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("user:", "serviceAccount:")):
        raise IamConfigError(f"{where}: expected a principal like user:EMAIL or "
                             f"serviceAccount:EMAIL, got {value!r}.")
    return value


def _members(where: str, value: Any) -> tuple[str, ...]:
    members = _strings(where, value)
    for member in members:
        try:
            check_member(member)
        except ApiError as exc:
            raise IamConfigError(f"{where}: {exc.message}") from None
    return members


def parse(data: Any, base: Path, where: str = "IAM config") -> IamConfig:
    data = _mapping(where, data)
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise IamConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(sorted(_TOP_KEYS))}.")
    groups = {str(g).removeprefix("group:"): _members(f"{where}.groups.{g}", m)
              for g, m in _mapping(f"{where}.groups", data.get("groups")).items()}
    custom = {str(r): frozenset(_strings(f"{where}.customRoles.{r}", p))
              for r, p in _mapping(f"{where}.customRoles", data.get("customRoles")).items()}
    config = IamConfig(
        audiences=_strings(f"{where}.audiences", data.get("audiences")),
        principal_header=data.get("principalHeader") or None,
        service_accounts=_service_accounts(f"{where}.serviceAccounts",
                                           data.get("serviceAccounts"), base),
        id_tokens=_id_tokens(f"{where}.idTokens", data.get("idTokens"), base),
        static_tokens={str(t): _principal(f"{where}.staticTokens", p)
                       for t, p in _mapping(f"{where}.staticTokens", data.get("staticTokens")).items()},
        memberships=expand_groups(groups),
        custom_roles=custom,
    )
    projects: dict[str, tuple[Binding, ...]] = {}
    for project, body in _mapping(f"{where}.projects", data.get("projects")).items():
        here = f"{where}.projects.{project}"
        body = _mapping(here, body)
        try:
            projects[str(project)] = tuple(parse_bindings(body.get("bindings"), config.is_role,
                                                          f"{here}.bindings"))
        except ApiError as exc:
            raise IamConfigError(f"{here}: {exc.message}") from None
    return dataclasses.replace(config, project_bindings=projects)


def load(path: Path) -> IamConfig:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise IamConfigError(f"Cannot read IAM config file {path}: {exc}") from None
    try:
        return parse(data, Path(path).resolve().parent, str(path))
    except keys.KeyMaterialError as exc:
        raise IamConfigError(f"{path}: {exc}") from None
