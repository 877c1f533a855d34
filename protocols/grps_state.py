"""grps server state and metadata shared by its HTTP and gRPC adapters (no Flask).

Spec: NetEase-Media/grps docs/2_Interface.md and its Python server (grps_framework/handler/
grps_handler.py), which this follows:

- Online/offline: a grps server starts *offline*; `health/ready` (CheckReadiness) answers ready
  only after `health/online` (Online) and until `health/offline` (Offline). mlemu does the same:
  `app.py serve` starts offline, and readiness also needs the models loaded. The flag is one file
  in the state directory (settings.grps_online_path), so every gunicorn worker and the gRPC
  server see the same state.
- Model selection: `name-version` (or `name`) from the message's `model` field or the `?model=`
  query parameter (the body wins); without one, MLEMU_GRPS_MODEL, else the default project's only
  model. ml v1 model and version ids cannot contain '-', so the split is unambiguous.
- Metadata: YAML text in `str_data`; the model is named by `str_data` (like grps), or `model`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

import auth
from core.errors import InvalidArgument
from core.payloads import Caller
from protocols import inference

if TYPE_CHECKING:
    from emulator import Emulator


def is_online(emu: Emulator) -> bool:
    return emu.settings.grps_online_path.exists()


#: What taking grps online or offline needs in IAM mode `enforce`: it changes the
#: state every caller sees, so it is the permission closest in meaning, on the default project.
#: live/ready stay open to every caller, as the other health probes.
ONLINE_PERMISSION = "ml.models.update"


def set_online(emu: Emulator, caller: Caller, online: bool) -> None:
    auth.authorize(emu, caller, ONLINE_PERMISSION, f"projects/{emu.settings.default_project}")
    if online:
        emu.settings.grps_online_path.touch()
    else:
        emu.settings.grps_online_path.unlink(missing_ok=True)


def is_ready(emu: Emulator) -> bool:
    return is_online(emu) and inference.server_ready(emu)


def split_model(selector: str) -> tuple[str, str | None]:
    name, _, version = selector.strip().partition("-")
    if not name:
        raise InvalidArgument(f"Invalid model {selector!r}: expected `name` or `name-version`.")
    return name, version or None


def select_model(emu: Emulator, selector: str | None) -> tuple[str, str | None]:
    """The (model, version) a predict call uses: explicit, configured, or the only model."""
    if selector:
        return split_model(selector)
    if emu.settings.grps_default_model:
        return split_model(emu.settings.grps_default_model)
    models = emu.store.list_models(f"projects/{emu.settings.default_project}")
    if len(models) == 1:
        return models[0].name.rsplit("/", 1)[-1], None
    raise InvalidArgument(
        "No model selected: pass `model` (name or name-version) in the message or as ?model=, "
        "or configure a default model with MLEMU_GRPS_MODEL."
    )


def server_metadata(emu: Emulator, caller: Caller) -> str:
    """Server metadata as YAML: the server, its protocols and the models it serves."""
    project = f"projects/{emu.settings.default_project}"
    auth.authorize(emu, caller, "ml.models.list", project)
    models = []
    for model in emu.store.list_models(project):
        versions = [inference.version_id(v) for v in emu.store.list_versions(model.name)]
        models.append({"name": model.name.rsplit("/", 1)[-1],
                       "default_version": model.default_version, "versions": versions})
    body: dict[str, Any] = {
        "server": {"name": inference.SERVER_NAME, "version": inference.SERVER_VERSION,
                   "project": emu.settings.default_project,
                   "default_model": emu.settings.grps_default_model,
                   "online": is_online(emu)},
        "models": models,
    }
    return yaml.safe_dump(body, sort_keys=False)


def model_metadata(emu: Emulator, caller: Caller, selector: str) -> str:
    if not selector:
        raise InvalidArgument("No model name: send the model's name in str_data.")
    name, version = split_model(selector)
    served, predictor = inference.get_model(emu, caller, name, version)
    body = {"version": inference.version_id(served), "framework": served.framework or "custom",
            **inference.describe(emu, served, predictor)}
    return yaml.safe_dump(body, sort_keys=False)
