"""The Emulator: one object holding an instance's settings, store, deployments and policy.

Every use case takes it as its first argument; nothing below the adapters reaches for globals.
All mutable state hangs off it: the store, the deployments (loaded predictors, their batchers and
load options), the task runner and the lastUseTime throttle, so two emulators built in one
process share nothing. It is built and wired (operation handlers registered, bootstrap applied,
runner started) by the composition root, `boot.build_emulator`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any

import auth
from batch.runners import Runners
from controls import Controls
from core.errors import ApiError
from core.settings import Settings
from observability import metric_files
from observability.metrics import Instruments
from observability.request_log import RequestLogger
from registry import artifacts, vertex_serving
from registry.deployments import Deployments
from registry.resources import Version
from registry.store import Store
from registry.tasks import TaskRunner

log = logging.getLogger("mlemu")


@dataclasses.dataclass
class Emulator:
    settings: Settings
    store: Store
    deployments: Deployments
    #: The IAM configuration (auth.IamConfig): identities, groups, project policies.
    policy: auth.IamConfig = dataclasses.field(default_factory=auth.IamConfig)
    started_at: float = dataclasses.field(default_factory=time.time)
    #: Version names declared by the bootstrap file (readiness waits for the first of these to
    #: load: warm_up).
    bootstrap_versions: list[str] = dataclasses.field(default_factory=list)
    warmed: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: Version name -> monotonic time this emulator last wrote its lastUseTime (dataplane.py).
    last_use: dict[str, float] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    #: Where versions.create may take model files from (MLEMU_MODEL_ROOTS, MLEMU_ALLOWED_BUCKETS).
    sources: artifacts.Sources = dataclasses.field(default_factory=artifacts.Sources)
    #: Where batch prediction jobs may read inputs and write outputs (MLEMU_DATA_ROOTS).
    data_sources: artifacts.Sources = dataclasses.field(default_factory=artifacts.Sources)
    #: Runs long-running operations off the request thread and adopts orphaned ones.
    tasks: TaskRunner = dataclasses.field(init=False, repr=False, compare=False)
    #: What metrics are recorded with (observability/metrics.py); None when metrics are off.
    instruments: Instruments | None = None
    #: Request-response logging of versions with a requestLoggingConfig.
    request_log: RequestLogger = dataclasses.field(init=False, repr=False, compare=False)
    #: Fault and timing rules, the request journal (controls/; docs/controls.md).
    controls: Controls = dataclasses.field(init=False, repr=False, compare=False)
    #: Store documents of the bootstrap file's models and versions once warmed: what a reset
    #: puts back (admin/reset.py).
    baseline: dict[str, dict[str, tuple[str, dict[str, Any]]]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False)
    #: Vertex AI endpoints' seeded traffic-split routers (registry/vertex_serving.py).
    vertex_routers: vertex_serving.Routers = dataclasses.field(
        default_factory=vertex_serving.Routers, repr=False, compare=False)
    #: Warm batch job runners, one per framework (batch/runners.py), started by the first job.
    batch_runners: Runners = dataclasses.field(init=False, repr=False, compare=False)
    #: (store change token, versions held) at the last prune_deployments (on_tick's thread only).
    pruned_at: tuple[object, frozenset[tuple[str, str]]] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.batch_runners = Runners(self.settings.jobs_path, self.settings.batch_runner_idle_s)

    def warm_up(self) -> None:
        """Load the READY bootstrap versions so their first requests do not pay for it.

        The first `ready_versions` (MLEMU_READY_VERSIONS) are loaded before this process reports
        ready (`warmed`); the others then load in the background, in the bootstrap file's order,
        while the caps on loaded versions leave room (the rest load on their first request), so
        readiness does not wait for a thousand models nor churn through more than fit. A version
        whose model cannot be loaded is marked FAILED with the reason, as a versions.create
        would have done, so it reports why it does not serve.
        """
        waits_for = max(0, self.settings.ready_versions)
        evicted = self.deployments.evicted
        try:
            for index, name in enumerate(self.bootstrap_versions):
                if index == waits_for:
                    self._ready()
                    evicted = self.deployments.evicted
                # Full: no room left, or a load since readiness had to unload another.
                full = not self.deployments.has_room() or self.deployments.evicted != evicted
                if index >= waits_for and full:
                    log.info("warm-up stopped after %d of %d bootstrap versions: the caps on "
                             "loaded versions are full; the others load on demand",
                             index, len(self.bootstrap_versions))
                    break
                self._warm(name)
        finally:
            if not self.warmed.is_set():
                self._ready()

    def _ready(self) -> None:
        self.remember_baseline()
        self.warmed.set()

    def ready_versions(self) -> list[str]:
        """The bootstrap versions readiness waits for (warm_up)."""
        return self.bootstrap_versions[:max(0, self.settings.ready_versions)]

    def _warm(self, name: str) -> None:
        version = self.store.get_version(name)
        if version is None or version.state != "READY" or self.deployments.is_loaded(version):
            return
        try:
            predictor = self.deployments.get(version)
        except ApiError as exc:
            log.warning("could not load %s: %s", name, exc.message)
            self._mark_failed(version, exc.message)
            if self.warmed.is_set():  # after readiness: what a reset restores is FAILED too
                for found, parent, doc in self.store.rows("versions", name):
                    if found == name:
                        self.baseline.setdefault("versions", {})[name] = (parent, doc)
        else:
            if not version.framework and not version.prediction_class:
                self._set_framework(version, predictor.framework)

    def remember_baseline(self) -> None:
        """Keep the bootstrap file's models and versions as stored now (after warm-up recorded
        what loading found), as kind -> name -> (parent, document): what a reset restores."""
        wanted = {"versions": set(self.bootstrap_versions),
                  "models": {name.rsplit("/versions/", 1)[0] for name in self.bootstrap_versions}}
        baseline: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {"models": {}, "versions": {}}
        # One pass over each kind: a prefix lookup per name scans the table each time (a name is
        # matched by prefix, which no index serves), so a thousand bootstrap versions made
        # readiness wait on two thousand scans.
        for kind, names_ in wanted.items():
            if names_:
                for found, parent, doc in self.store.rows(kind):
                    if found in names_:
                        baseline[kind][found] = (parent, doc)
        self.baseline = baseline

    def _mark_failed(self, version: Version, message: str) -> None:
        def fail(current: Version) -> bool:
            if current.state != "READY":
                return False
            current.state, current.error_message = "FAILED", message
            return True

        self.store.update_version(version, fail)

    def _set_framework(self, version: Version, framework: str) -> None:
        """Record the framework a load detected (gs:// bootstrap versions are not inspected
        before warm-up downloads them)."""
        def record(current: Version) -> bool:
            if current.framework:
                return False
            current.framework = framework
            return True

        self.store.update_version(version, record)

    def prune_deployments(self) -> None:
        """Free the predictors of versions another process or instance deleted or re-created.
        Skipped while neither the store nor what this process holds changed since the last
        prune: it reads every held version from the store (200 queries with 200 models)."""
        token = self.store.change_token()  # before the reads, as registry/lookup.py takes it
        held = self.deployments.incarnations()
        if token is not None and self.pruned_at == (token, held):
            return

        def current_uid(name: str) -> str | None:
            if vertex_serving.parse_serving_key(name) is not None:  # a Vertex AI deployment
                return vertex_serving.deployed_uid(self.store, name)
            version = self.store.get_version(name)
            return version.uid if version is not None else None

        for name in self.deployments.prune(current_uid):
            log.info("unloaded %s: deleted or re-created elsewhere", name)
        self.pruned_at = (token, held)

    def store_problem(self) -> str | None:
        """Why the store cannot be used now (a damaged, read-only or unreachable store), if so."""
        try:
            self.store.check()
        except ApiError as exc:
            return exc.message
        return None

    def degraded(self) -> list[str]:
        """What works only in part now, with predictions still served: a state directory
        without free space (changes answer 503 until there is), metrics held in memory."""
        problems = []
        try:
            room = os.statvfs(self.settings.state_dir)
        except OSError:
            room = None
        if room is not None and room.f_bavail == 0:
            problems.append(f"no space left on the state directory's filesystem "
                            f"({self.settings.state_dir}): predictions are served; changes answer "
                            "503 UNAVAILABLE until space is freed")
        files = metric_files.detached()
        if files:
            problems.append(f"metrics of this process are kept in memory ({len(files)} files "
                            "could not be written): scrapes miss them until the disk has room")
        return problems

    def on_tick(self) -> None:
        """The task runner's periodic call (every few seconds, in every process)."""
        self.prune_deployments()
        # Metric rows of versions unloaded are forgotten and their memory goes back to the system.
        self.deployments.trim()
        if self.instruments is not None:
            self.instruments.update_process(min_interval_s=5.0)
            metric_files.reattach_all()  # metrics held in memory back to their files, if room

    def is_ready(self) -> bool:
        """Bootstrap models loaded and the store usable: every readiness probe asks this."""
        return self.warmed.is_set() and self.store_problem() is None
