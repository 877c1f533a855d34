"""The Store interface shared by every backend, the kinds of document it holds, and its schema
version.

Both backends (registry/store.py's SQLite, registry/store_postgres.py's PostgreSQL) import from
here, and registry/store.py's `open_store` chooses between them, so neither backend module
imports the other.

The schema version is one row in each backend's `meta` table, written when a store is first
opened. Documents are JSON whose fields the resources decode tolerantly (registry/resources.py
`from_stored`), so a row written by an older or newer layout still reads; the version row says
which layout wrote the store, for a future migration to act on.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from registry.resources import Model, Operation, Version

log = logging.getLogger("mlemu.store")

#: "tasks" holds the claim (owner, lease) of every unfinished long-running operation; see
#: registry/tasks.py. "jobs" holds batch prediction jobs (registry/jobs.py; a kind added within
#: schema version 1: its table is created on open, and older code never reads it), as does
#: "request_logs", the local request-response log rows of each version
#: (observability/request_log.py). The vertex_* kinds hold Vertex AI's models, endpoints,
#: operations and batch prediction jobs (registry/vertex_resources.py). A backend needs nothing
#: beyond get/children/put/delete and transaction().
KINDS = ("models", "versions", "operations", "policies", "tasks", "jobs", "request_logs",
         "vertex_models", "vertex_endpoints", "vertex_operations", "vertex_batch_jobs")


class Store(abc.ABC):
    """Generic document storage: kind -> name -> JSON body, with a parent for listing."""

    @abc.abstractmethod
    def transaction(self, *, quiet: bool = False) -> contextlib.AbstractContextManager[None]:
        """Serialise a read-check-write sequence against every other writer (reentrant).
        `quiet`: bookkeeping that nothing cached by the change token depends on (lastUseTime):
        the token need not change for it (a nested loud transaction still changes it)."""

    @abc.abstractmethod
    def get(self, kind: str, name: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    def children(self, kind: str, parent: str) -> list[dict[str, Any]]:
        """Documents of `kind` whose parent is `parent`, ordered by name."""

    def child_names(self, kind: str, parent: str) -> list[str]:
        """Names of `children` (ordered by name) without reading their documents: what a list
        page is chosen by before only its documents are read."""
        return [d["name"] for d in self.children(kind, parent)]

    @abc.abstractmethod
    def every(self, kind: str) -> list[dict[str, Any]]:
        """Every document of `kind`, whatever its parent (all projects), ordered by name."""

    @abc.abstractmethod
    def put(self, kind: str, name: str, parent: str, body: dict[str, Any]) -> None:
        """Insert or replace."""

    @abc.abstractmethod
    def delete(self, kind: str, name: str) -> bool: ...

    def rows(self, kind: str, prefix: str = "") -> list[tuple[str, str, dict[str, Any]]]:
        """(name, parent, body) of every document of `kind` whose name starts with `prefix`,
        ordered by name (reset and snapshots walk the whole store)."""
        raise NotImplementedError

    @abc.abstractmethod
    def delete_children(self, kind: str, parent: str) -> int:
        """Delete every document of `kind` whose parent is `parent` (none read); how many."""

    def check(self) -> None:
        """Raise `Unavailable` unless the store can be read now (the readiness probe asks)."""
        for kind in KINDS:
            self.children(kind, "")

    def close(self) -> None:
        """Release connections."""

    def scratch(self) -> dict[str, Any]:
        """Scratch space of this store's readers (registry/lookup.py caches serving versions
        there under the change token), so it lives and dies with the store, not the process.
        Shared by the process's threads where their change tokens agree (`tokens_shared`): a
        version one thread read then serves every thread, so with a thousand versions a thread
        need not read each itself; per thread otherwise, where one thread's token would only
        evict another's entries."""
        if self.tokens_shared():
            shared = self.__dict__.get("_scratch")
            if shared is None:  # dict.setdefault is atomic: racing threads get the same dict
                shared = self.__dict__.setdefault("_scratch", {})
            return shared  # type: ignore[no-any-return]
        local = self.__dict__.get("_per_thread")
        if local is None:
            local = self.__dict__.setdefault("_per_thread", threading.local())
        mine: dict[str, Any] | None = getattr(local, "scratch", None)
        if mine is None:
            mine = local.scratch = {}
        return mine

    def memo(self, name: str) -> dict[Any, Any] | None:
        """The readers' cache `name` for the store's current change token, emptied whenever the
        token changes (None: the backend has no token, so nothing may be cached). A thread whose
        token is older than the cached one's replaces it too: its read may be of the older state,
        kept under the older token, so it only costs the others a miss."""
        token = self.change_token()
        if token is None:
            return None
        cache = self.scratch()
        entry: tuple[object, dict[Any, Any]] | None = cache.get(name)
        if entry is None or entry[0] != token:
            entry = cache[name] = (token, {})
        return entry[1]

    def tokens_shared(self) -> bool:
        """Whether every thread of this process gets the same change token for the same state."""
        return False

    def schema_version(self) -> int | None:
        """The layout recorded in the store's schema-version row (None: not recorded)."""
        return None

    def change_token(self) -> object | None:
        """A value that differs after any committed change but quiet ones (`transaction`), from
        any process; None if the backend cannot tell cheaply (then readers must not cache).
        Tokens of different threads may differ for the same state (compare them only as equal
        or not: a cache keyed by one then only misses)."""
        return None

    # Typed helpers shared by every backend.
    def get_model(self, name: str) -> Model | None:
        data = self.get("models", name)
        return Model.from_storage(data) if data is not None else None

    def list_models(self, project_name: str) -> list[Model]:
        return [Model.from_storage(d) for d in self.children("models", project_name)]

    def put_model(self, model: Model) -> None:
        self.put("models", model.name, model.name.rsplit("/models/", 1)[0], model.storage())

    def get_version(self, name: str) -> Version | None:
        data = self.get("versions", name)
        return Version.from_storage(data) if data is not None else None

    def list_versions(self, model_name: str) -> list[Version]:
        return [Version.from_storage(d) for d in self.children("versions", model_name)]

    def every_version(self) -> list[Version]:
        """The versions of every model of every project."""
        return [Version.from_storage(d) for d in self.every("versions")]

    def put_version(self, version: Version) -> None:
        self.put("versions", version.name, version.name.rsplit("/versions/", 1)[0],
                 version.storage())

    def update_version(self, version: Version, change: Callable[[Version], bool], *,
                       quiet: bool = False) -> None:
        """In one transaction: apply `change` to the stored copy of `version` and write it back,
        if that copy is still the same incarnation (same uid: not deleted or re-created
        meanwhile) and `change` returns True (it made a change). `quiet`: see `transaction`."""
        with self.transaction(quiet=quiet):
            current = self.get_version(version.name)
            if current is not None and current.uid == version.uid and change(current):
                self.put_version(current)

    def get_operation(self, name: str) -> Operation | None:
        data = self.get("operations", name)
        return Operation.from_storage(data) if data is not None else None

    def list_operations(self, project_name: str) -> list[Operation]:
        return [Operation.from_storage(d) for d in self.children("operations", project_name)]

    def put_operation(self, op: Operation) -> None:
        self.put("operations", op.name, op.name.rsplit("/operations/", 1)[0], op.storage())

#: The layout this code writes. 1: the documents of KINDS as JSON, plus the `meta` table. Stores
#: written before the version row existed have the same tables and read as version 1.
SCHEMA_VERSION = 1
SCHEMA_KEY = "schema_version"


def check_schema(stored: str | None, where: str) -> bool:
    """Whether the store's schema-version row must be written (it has none yet); warns when a
    newer mlemu wrote the store (its documents are then read field by field, tolerantly)."""
    if stored is None:
        return True
    try:
        version = int(stored)
    except ValueError:
        log.warning("%s has an unreadable schema version %r; reading it as version %d",
                    where, stored, SCHEMA_VERSION)
        return False
    if version > SCHEMA_VERSION:
        log.warning("%s was written by a newer mlemu (schema version %d; this one writes %d): "
                    "fields this version does not know are ignored", where, version, SCHEMA_VERSION)
    return False
