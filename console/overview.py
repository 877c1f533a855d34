"""What the console's overview and resource pages show, gathered through the use cases with the
console user's credentials (so a section the user may not list says so instead of showing it).

Projects have no list method in ml v1; the console offers those the emulator knows of: the
default project, the bootstrap file's, the IAM config's project policies, and any the user
names (the overview's project field).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import auth
from controlplane import jobs, models, operations, versions
from core.errors import ApiError
from core.payloads import Caller
from registry import names

if TYPE_CHECKING:
    from emulator import Emulator

#: The first page of each list (ml v1's largest page).
PAGE = 100
#: Operations shown: the most recent ones.
RECENT_OPERATIONS = 20
#: The tail of a batch job's pipeline log shown with it.
LOG_TAIL_LINES, LOG_TAIL_BYTES = 8, 4096


@dataclasses.dataclass
class Section:
    """A list for the page, or why the user cannot see it."""

    items: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    error: str = ""


def known_projects(emu: Emulator, asked: str | None = None) -> list[str]:
    found = {emu.settings.default_project, *emu.policy.project_bindings}
    for version in emu.bootstrap_versions:
        found.add(version.split("/")[1])
    if asked:
        found.add(asked)
    return sorted(found)


def valid_project(project: str) -> bool:
    """A project id as the registry accepts them in resource names."""
    return names.PROJECT_RE.fullmatch(project) is not None


def _section(call: Callable[[], dict[str, Any]], key: str) -> Section:
    try:
        return Section(call().get(key, []))
    except ApiError as exc:
        return Section(error=exc.message)


def models_with_versions(emu: Emulator, caller: Caller, project: str) -> Section:
    """The project's models, each with its versions under `versions` (or `versionsError`)."""
    section = _section(lambda: models.list_models(emu, caller, f"projects/{project}",
                                                  page_size=PAGE), "models")
    for model in section.items:
        name: str = model["name"]
        listed = _section(functools.partial(versions.list_versions, emu, caller, name,
                                            page_size=PAGE), "versions")
        model["versions"], model["versionsError"] = listed.items, listed.error
    return section


def batch_jobs(emu: Emulator, caller: Caller, project: str) -> Section:
    """The project's batch prediction jobs with the tail of each one's pipeline log."""
    section = _section(lambda: jobs.list_jobs(emu, caller, f"projects/{project}", page_size=PAGE),
                       "jobs")
    for job in section.items:
        job["logTail"] = log_tail(emu.settings.jobs_path / project / job["jobId"] / "pipeline.log")
    return section


def log_tail(path: Path) -> str:
    """The last lines of a pipeline log (empty when there is none yet)."""
    try:
        with path.open("rb") as log:
            size = log.seek(0, 2)
            log.seek(max(0, size - LOG_TAIL_BYTES))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])


def recent_operations(emu: Emulator, caller: Caller, project: str) -> Section:
    section = _section(lambda: operations.list_operations(emu, caller, f"projects/{project}",
                                                          page_size=PAGE), "operations")
    section.items.sort(key=lambda op: op.get("metadata", {}).get("createTime", ""), reverse=True)
    del section.items[RECENT_OPERATIONS:]
    return section


def model_page(emu: Emulator, caller: Caller, project: str, model: str) -> dict[str, Any]:
    """A model's resource and its versions (ApiError when the model cannot be read)."""
    name = f"projects/{project}/models/{model}"
    found = models.get_model(emu, caller, name)
    found["versions"] = _section(lambda: versions.list_versions(emu, caller, name, page_size=PAGE),
                                 "versions").items
    return found


def version_page(emu: Emulator, caller: Caller, project: str, model: str,
                 version: str) -> dict[str, Any]:
    """A version's resource (ApiError when it cannot be read)."""
    return versions.get_version(emu, caller, f"projects/{project}/models/{model}/versions/{version}")


def visible_models(emu: Emulator, caller: Caller, project: str) -> set[str] | None:
    """Model ids whose figures (metrics, loaded versions: labelled by model id, not project) this
    caller may see: None (all) with IAM off or metrics public, else the models of `project` it
    may list."""
    if not auth.enforced(emu) or emu.settings.metrics_public:
        return None
    try:
        listed = models.list_models(emu, caller, f"projects/{project}", page_size=PAGE)
    except ApiError:
        return set()
    return {model["name"].rsplit("/", 1)[-1] for model in listed.get("models", [])}


def loaded_here(emu: Emulator) -> list[str]:
    """Version names this serving process holds loaded."""
    return sorted(emu.deployments.loaded())
