"""ml v1 `projects.getConfig`: the service account AI Platform acts as in a project.

The real service answers with a per-project Google-managed service account
(`service-<project number>@cloud-ml.google.com.iam.gserviceaccount.com`) and the project
number. mlemu has no project numbers, so it derives a stable 12-digit one from the project id.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import auth
from core.payloads import Caller

if TYPE_CHECKING:
    from emulator import Emulator


def project_number(project: str) -> str:
    digest = int(hashlib.sha256(project.encode()).hexdigest(), 16)
    return str(100_000_000_000 + digest % 900_000_000_000)


def get_config(emu: Emulator, caller: Caller, name: str) -> dict[str, Any]:
    auth.authorize(emu, caller, "ml.projects.getConfig", name)
    number = project_number(name.removeprefix("projects/"))
    account = f"service-{number}@cloud-ml.google.com.iam.gserviceaccount.com"
    return {
        "serviceAccount": account,
        "serviceAccountProject": number,
        "config": {"tpuServiceAccount": f"service-{number}@cloud-tpu.iam.gserviceaccount.com"},
    }
