"""The Emulator: one object holding an instance's settings, store, deployments and policy.

`create_app` (and the gRPC server) build one with `build_emulator(settings)` and pass it to every
use case; nothing below the adapters reaches for globals.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import auth
import predictors
from errors import ApiError
from registry import bootstrap
from registry.deployments import Deployments
from registry.resources import Version
from registry.store import Store, open_store
from registry.tasks import TaskRunner
from settings import Settings

log = logging.getLogger("mlemu")


@dataclasses.dataclass
class Emulator:
    settings: Settings
    store: Store
    deployments: Deployments
    #: The IAM configuration (auth.IamConfig): identities, groups, project policies.
    policy: auth.IamConfig = dataclasses.field(default_factory=auth.IamConfig)
    started_at: float = dataclasses.field(default_factory=time.time)
    #: Version names declared by the bootstrap file (readiness waits for these to load).
    bootstrap_versions: list[str] = dataclasses.field(default_factory=list)
    warmed: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: Runs long-running operations off the request thread and adopts orphaned ones.
    tasks: TaskRunner = dataclasses.field(init=False, repr=False, compare=False)

    def warm_up(self) -> None:
        """Load every READY bootstrap version so the first request does not pay for it.

        A version whose model cannot be loaded is marked FAILED with the reason, as a
        versions.create would have done, so it reports why it does not serve.
        """
        try:
            for name in self.bootstrap_versions:
                version = self.store.get_version(name)
                if version is None or version.state != "READY":
                    continue
                try:
                    self.deployments.get(version)
                except ApiError as exc:
                    log.warning("could not load %s: %s", name, exc.message)
                    self._mark_failed(version, exc.message)
        finally:
            self.warmed.set()

    def _mark_failed(self, version: Version, message: str) -> None:
        with self.store.transaction():
            current = self.store.get_version(version.name)
            if current is not None and current.uid == version.uid and current.state == "READY":
                current.state, current.error_message = "FAILED", message
                self.store.put_version(current)

    def is_ready(self) -> bool:
        return self.warmed.is_set()


def build_emulator(settings: Settings, *, warm: bool = True) -> Emulator:
    iam = auth.load_config(settings)  # a bad IAM config stops the start, before any state
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.database_url, settings.state_dir)
    predictors.configure(xgboost_nthread=settings.xgboost_nthread)
    emu = Emulator(settings, store, Deployments(settings.state_dir / "packages"), iam)
    if settings.config_file is not None:
        emu.bootstrap_versions = bootstrap.apply(store, settings.config_file)
    # Starting the runner also recovers operations a dead process left unfinished.
    emu.tasks = TaskRunner(store, emu)
    emu.tasks.start()
    if warm:
        threading.Thread(target=emu.warm_up, name="mlemu-warm-up", daemon=True).start()
    else:
        emu.warmed.set()
    return emu
