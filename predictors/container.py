"""Vertex AI custom containers as local processes (opt-in, MLEMU_VERTEX_LOCAL_CONTAINERS).

A model whose containerSpec names a custom image and a `command` is served by running that
command and its `args` here (no shell, no image: docs/vertex.md says what differs from a
container) with the environment Vertex AI gives a custom container, then forwarding predictions
to its predict route. The contract followed is Vertex AI's "Custom container requirements for
prediction" (https://cloud.google.com/vertex-ai/docs/predictions/custom-container-requirements)
and ModelContainerSpec's field documentation (google/cloud/aiplatform/v1/model.proto,
googleapis/googleapis): AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE (defaulting to
/v1/endpoints/ENDPOINT/deployedModels/DEPLOYED_MODEL[:predict]), AIP_STORAGE_URI, AIP_MODE, ...,
then containerSpec.env, with `$(VAR)` references in env, command and args expanded as Kubernetes
does.

`ContainerHost` is one emulator's policy and bookkeeping (the allow-list of executables, the
bounds, the processes it started); `ContainerPredictor` is the loaded model the deployments cache
holds, one per deployed model and serving process, so every prediction passes the data plane.
"""

from __future__ import annotations

import atexit
import dataclasses
import gc
import os
import re
import shutil
import socket
import threading
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar

from core import wirejson
from core.errors import (
    ApiError,
    Code,
    FailedPrecondition,
    ModelLoadError,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
    from_code,
)
from predictors.base import Predictor
from predictors.container_process import ContainerProcess

#: Variables of the serving process a command inherits; nothing else of mlemu's environment
#: (its settings, credentials) reaches user code.
INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")
#: Bytes of a failing container's answer quoted in the error.
ERROR_BYTES = 1000
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclasses.dataclass(frozen=True)
class ContainerLimits:
    """What an emulator allows (from its Settings)."""

    enabled: bool = False
    #: Executables `command[0]` may name (names or paths); None: any (IAM off only).
    commands: tuple[str, ...] | None = None
    start_s: float = 120.0
    timeout_s: float = 60.0
    max_processes: int = 4
    max_response_bytes: int = 64 * 1024 * 1024
    enforce: bool = False


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` references (`$$` is a literal `$`; an unknown one stays as is)."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))
    return _REFERENCE.sub(one, text)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ContainerHost:
    """Starts and tracks one emulator's container processes."""

    def __init__(self, limits: ContainerLimits) -> None:
        if limits.enabled and limits.enforce and not limits.commands:
            # Settings.from_env refuses this at start; a host built otherwise refuses it too.
            raise ValueError("MLEMU_VERTEX_LOCAL_CONTAINERS with MLEMU_IAM_MODE=enforce needs "
                             "MLEMU_VERTEX_CONTAINER_COMMANDS")
        self.limits = limits
        self._live: weakref.WeakSet[ContainerProcess] = weakref.WeakSet()
        self._lock = threading.Lock()
        atexit.register(_stop_all, self._live)

    def allowed(self, executable: str) -> bool:
        """Whether `command[0]` is on the allow-list: by the name given, or as the same file
        once both are looked up on PATH."""
        commands = self.limits.commands
        if commands is None:
            return True
        if executable in commands:
            return True
        found = shutil.which(executable)
        real = os.path.realpath(found) if found else None
        return real is not None and any(
            (w := shutil.which(c)) is not None and os.path.realpath(w) == real for c in commands)

    def running(self) -> list[ContainerProcess]:
        return [p for p in list(self._live) if p.running]

    def start(self, spec: Mapping[str, Any], model_dir: str) -> ContainerPredictor:
        """Run the deployed model's command and wait for its health route (FailedPrecondition
        with its last output if it exits or stays unhealthy)."""
        limits = self.limits
        command = [str(c) for c in [*spec.get("command", []), *spec.get("args", [])]]
        if not limits.enabled or not spec.get("command"):
            raise FailedPrecondition("Custom containers do not run here (docs/vertex.md).")
        if not self.allowed(command[0]):
            raise PermissionDenied(
                f"The container command {command[0]!r} is not one this server runs "
                "(MLEMU_VERTEX_CONTAINER_COMMANDS).")
        endpoint_id, deployed_id = spec["endpointId"], spec["deployedModelId"]
        default = f"/v1/endpoints/{endpoint_id}/deployedModels/{deployed_id}"
        predict_route = spec.get("predictRoute") or default + ":predict"
        health_route = spec.get("healthRoute") or default
        with self._lock:
            if len(self.running()) >= limits.max_processes:
                # A model the loaded-versions cap unloaded is forgotten, not closed (a request
                # may still use it): its process ends when it is collected, perhaps now.
                gc.collect()
            if len(self.running()) >= limits.max_processes:
                raise ResourceExhausted(
                    f"This server already runs {limits.max_processes} container processes "
                    "(MLEMU_VERTEX_MAX_CONTAINERS); undeploy one first.")
            port = _free_port()
            env = {k: os.environ[k] for k in INHERITED if k in os.environ}
            aip = {"AIP_HTTP_PORT": str(port), "AIP_HEALTH_ROUTE": health_route,
                   "AIP_PREDICT_ROUTE": predict_route, "AIP_MODE": "PREDICTION",
                   "AIP_MODE_VERSION": "1.0.0", "AIP_FRAMEWORK": "CUSTOM_CONTAINER",
                   "AIP_DEPLOYED_MODEL_ID": deployed_id, "AIP_ENDPOINT_ID": endpoint_id,
                   "AIP_PROJECT_NUMBER": spec.get("project", "")}
            if model_dir:
                aip["AIP_STORAGE_URI"] = model_dir
            env.update(aip)
            for item in spec.get("env") or []:
                if isinstance(item, dict) and item.get("name"):
                    env[str(item["name"])] = expand(str(item.get("value", "")), env)
            env.update(aip)  # Vertex AI's own variables are not the spec's to change
            command = [expand(c, env) for c in command]
            process = ContainerProcess(command, env, port, f"{endpoint_id}/{deployed_id}")
            self._live.add(process)
        process.wait_healthy(health_route, limits.start_s)
        return ContainerPredictor(process, predict_route, limits)

    def stop_all(self) -> None:
        _stop_all(self._live)


def _stop_all(live: weakref.WeakSet[ContainerProcess]) -> None:
    for process in list(live):
        process.stop()


def container_error(status: int, data: bytes) -> ApiError:
    """A container's answer that is not a 2xx, as an error: its own status, with the canonical
    code of that status's class, quoting the start of its body."""
    text = data[:ERROR_BYTES].decode("utf-8", "replace")
    message = f"The container answered HTTP {status}: {text}"
    if not 400 <= status < 600:
        return Unavailable(message)
    code = Code.INVALID_ARGUMENT if status < 500 else Code.INTERNAL
    return from_code(code, message, http_status=status)


class ContainerPredictor(Predictor):
    """A deployed custom container: `predict` posts `{"instances", "parameters"}` to its
    predict route and returns its `predictions`; `raw` forwards a body as it is (rawPredict)."""

    accepted_parameters: ClassVar[frozenset[str] | None] = None  # the container decides

    def __init__(self, process: ContainerProcess, predict_route: str,
                 limits: ContainerLimits) -> None:
        self.process = process
        self.predict_route = predict_route
        self._limits = limits

    @classmethod
    def from_path(cls, model_dir: str) -> Predictor:
        raise ModelLoadError("A custom container is started from its containerSpec, not a path.")

    def raw(self, body: bytes, content_type: str) -> tuple[int, str, bytes]:
        """The container's (status, content type, body) for a request body sent as it came."""
        return self.process.request("POST", self.predict_route, body, content_type,
                                    self._limits.timeout_s, self._limits.max_response_bytes)

    def predict(self, instances: list[Any], **kwargs: Any) -> Any:
        payload: dict[str, Any] = {"instances": instances}
        if kwargs:
            payload["parameters"] = kwargs
        status, _, data = self.raw(wirejson.dumps(payload), "application/json")
        if not 200 <= status < 300:
            raise container_error(status, data)
        try:
            body = wirejson.loads(data)
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("predictions"), list):
            raise FailedPrecondition(
                f"The container's answer to {self.predict_route} is not a JSON object with a "
                '"predictions" list, as Vertex AI requires of a custom container.')
        return body["predictions"]

    def close(self) -> None:
        self.process.stop()
