"""The durable store behind the registry: models, versions, operations and IAM policies.

`Store` is the interface; `SqliteStore` is the embedded default, one file in the state directory
that every gunicorn worker opens (WAL mode, so readers never wait on the writer);
`PostgresStore` (registry/store_postgres.py) serves several instances sharing one state. Each mutation
runs in one transaction (`with store.transaction():` around a read-check-write sequence takes the
write lock first, `BEGIN IMMEDIATE`), so a crash mid-write leaves no half-written resource.
Resources are stored as JSON documents keyed by their full resource name.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from registry.resources import Model, Operation, Version

#: "tasks" holds the claim (owner, lease) of every unfinished long-running operation; see
#: registry/tasks.py. A backend needs nothing beyond get/children/put/delete and transaction().
KINDS = ("models", "versions", "operations", "policies", "tasks")


class Store(abc.ABC):
    """Generic document storage: kind -> name -> JSON body, with a parent for listing."""

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Serialise a read-check-write sequence against every other writer (reentrant)."""

    @abc.abstractmethod
    def get(self, kind: str, name: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    def children(self, kind: str, parent: str) -> list[dict[str, Any]]:
        """Documents of `kind` whose parent is `parent`, ordered by name."""

    @abc.abstractmethod
    def put(self, kind: str, name: str, parent: str, body: dict[str, Any]) -> None:
        """Insert or replace."""

    @abc.abstractmethod
    def delete(self, kind: str, name: str) -> bool: ...

    def close(self) -> None:
        """Release connections."""

    def change_token(self) -> object | None:
        """A value that differs after any committed change, from any process; None if the backend
        cannot tell cheaply (then readers must not cache). Compare tokens from one thread only."""
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

    def put_version(self, version: Version) -> None:
        self.put("versions", version.name, version.name.rsplit("/versions/", 1)[0],
                 version.storage())

    def update_version(self, version: Version, change: Callable[[Version], bool]) -> None:
        """In one transaction: apply `change` to the stored copy of `version` and write it back,
        if that copy is still the same incarnation (same uid: not deleted or re-created
        meanwhile) and `change` returns True (it made a change)."""
        with self.transaction():
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


class SqliteStore(Store):
    """SQLite in WAL mode; one connection per thread, reopened after a fork."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        #: Bumped by this process's writes and transaction ends: PRAGMA data_version only sees
        #: other connections' commits, not the calling connection's own.
        self._writes = 0
        with self._conn() as conn:  # create the schema once, under the write lock
            conn.execute("BEGIN IMMEDIATE")
            for kind in KINDS:
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {kind} (name TEXT PRIMARY KEY, parent TEXT NOT NULL,"
                    " body TEXT NOT NULL)"
                )
                conn.execute(f"CREATE INDEX IF NOT EXISTS {kind}_parent ON {kind}(parent, name)")
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None or getattr(local, "pid", None) != os.getpid():
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=30000")
            local.conn, local.pid, local.depth = conn, os.getpid(), 0
        yield conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._conn() as conn:
            local = self._local
            if local.depth:
                local.depth += 1
                try:
                    yield
                finally:
                    local.depth -= 1
                return
            conn.execute("BEGIN IMMEDIATE")
            local.depth = 1
            try:
                yield
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                local.depth = 0
                self._writes += 1

    def _check(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        self._check(kind)
        with self._conn() as conn:
            row = conn.execute(f"SELECT body FROM {kind} WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def children(self, kind: str, parent: str) -> list[dict[str, Any]]:
        self._check(kind)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT body FROM {kind} WHERE parent = ? ORDER BY name", (parent,)
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def put(self, kind: str, name: str, parent: str, body: dict[str, Any]) -> None:
        self._check(kind)
        with self._conn() as conn:
            conn.execute(
                f"INSERT INTO {kind}(name, parent, body) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET parent = excluded.parent, body = excluded.body",
                (name, parent, json.dumps(body)),
            )
        self._writes += 1

    def delete(self, kind: str, name: str) -> bool:
        self._check(kind)
        with self._conn() as conn:
            cur = conn.execute(f"DELETE FROM {kind} WHERE name = ?", (name,))
        self._writes += 1
        return cur.rowcount > 0

    def change_token(self) -> object | None:
        with self._conn() as conn:
            (version,) = conn.execute("PRAGMA data_version").fetchone()
        return (self._writes, version, id(conn))

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def open_store(database_url: str | None, state_dir: Path) -> Store:
    """The store a settings object asks for; SQLite in the state directory by default,
    PostgreSQL for postgresql:// URLs (registry/store_postgres.py, imported only then)."""
    if database_url and database_url.startswith(("postgresql://", "postgres://")):
        from registry.store_postgres import PostgresStore

        return PostgresStore(database_url)
    if database_url and not database_url.startswith("sqlite:"):
        scheme = database_url.split(":", 1)[0]
        raise ValueError(f"Unsupported MLEMU_DATABASE_URL scheme {scheme!r}: use sqlite:///PATH "
                         "or postgresql://USER:PASSWORD@HOST:PORT/DBNAME.")
    if database_url:
        return SqliteStore(Path(database_url.split("sqlite:///", 1)[-1]))
    return SqliteStore(state_dir / "mlemu.sqlite3")
