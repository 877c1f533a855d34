"""The durable store behind the registry: models, versions, operations and IAM policies.

`Store` is the interface (registry/store_base.py, re-exported here); `SqliteStore` is the
embedded default, one file in the state directory
that every gunicorn worker opens (WAL mode, so readers never wait on the writer);
`PostgresStore` (registry/store_postgres.py) serves several instances sharing one state. Each mutation
runs in one transaction (`with store.transaction():` around a read-check-write sequence takes the
write lock first, `BEGIN IMMEDIATE`), so a crash mid-write leaves no half-written resource.
Resources are stored as JSON documents keyed by their full resource name. `open_store` picks the
backend a database URL names.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import Unavailable
from registry.change_signal import ChangeSignal
from registry.store_base import KINDS, SCHEMA_KEY, SCHEMA_VERSION, Store, check_schema

__all__ = ["KINDS", "SqliteStore", "Store", "open_store"]


class SqliteStore(Store):
    """SQLite in WAL mode; one connection per thread, reopened after a fork."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self.unavailable(exc.strerror or exc) from None
        self._local = threading.local()
        #: Bumped by this process's writes and transaction ends: PRAGMA data_version only sees
        #: other connections' commits, not the calling connection's own.
        self._writes = 0
        #: Every process's commits, without a query (registry/change_signal.py); None: the query.
        self._signal = ChangeSignal.open(self.path.with_name(self.path.name + "-changes"))
        with self._conn() as conn:  # create the schema once, under the write lock
            conn.execute("BEGIN IMMEDIATE")
            for kind in KINDS:
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {kind} (name TEXT PRIMARY KEY, parent TEXT NOT NULL,"
                    " body TEXT NOT NULL)"
                )
                conn.execute(f"CREATE INDEX IF NOT EXISTS {kind}_parent ON {kind}(parent, name)")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            if check_schema(self._meta(conn), str(self.path)):
                conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)",
                             (SCHEMA_KEY, str(SCHEMA_VERSION)))
            conn.execute("COMMIT")

    @staticmethod
    def _meta(conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (SCHEMA_KEY,)).fetchone()
        return row[0] if row else None

    def schema_version(self) -> int | None:
        with self._conn() as conn:
            value = self._meta(conn)
        return int(value) if value is not None and value.isdigit() else None

    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        try:
            if conn is None or getattr(local, "pid", None) != os.getpid():
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("PRAGMA busy_timeout=30000")
                local.conn, local.pid, local.depth, local.quiet = conn, os.getpid(), 0, False
            yield conn
        except (sqlite3.OperationalError, sqlite3.DataError) as exc:
            raise self.unavailable(exc) from None
        except sqlite3.DatabaseError as exc:  # "file is not a database", "disk image is malformed"
            if isinstance(exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                raise  # the code's mistake, not the store's state
            raise self.unavailable(exc) from None

    def unavailable(self, exc: Exception | str) -> Unavailable:
        """What a damaged, read-only or locked store file means for callers: 503 UNAVAILABLE,
        naming the file and the fix (the error also ends startup as one line, app.py)."""
        return Unavailable(
            f"The state store {self.path} cannot be used: {exc}. If it is damaged, restore it "
            "from a backup or move it away (mlemu then starts an empty one); if it is read-only, "
            "make it and its directory writable by the server's user; if its disk is full, free "
            "space (predictions go on meanwhile).")

    def check(self) -> None:
        super().check()
        for path in (self.path, self.path.parent):  # SQLite opens an unwritable file read-only
            if path.exists() and not os.access(path, os.W_OK):
                raise self.unavailable(f"{path} is read-only")

    @contextlib.contextmanager
    def transaction(self, *, quiet: bool = False) -> Iterator[None]:
        with self._conn() as conn:
            local = self._local
            if local.depth:
                if not quiet:  # a loud write inside a quiet transaction makes it loud
                    local.quiet = False
                local.depth += 1
                try:
                    yield
                finally:
                    local.depth -= 1
                return
            conn.execute("BEGIN IMMEDIATE")
            local.depth, local.quiet = 1, quiet
            writes = self._writes
            try:
                yield
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                local.depth = 0
                # Other processes are signalled only if the transaction wrote: a bootstrap file
                # applied unchanged by the next worker must not drop every process's caches.
                if self._writes != writes:
                    self._wrote(committed=True)
                local.quiet = False

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

    def child_names(self, kind: str, parent: str) -> list[str]:
        self._check(kind)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT name FROM {kind} WHERE parent = ? ORDER BY name", (parent,)).fetchall()
        return [r[0] for r in rows]

    def rows(self, kind: str, prefix: str = "") -> list[tuple[str, str, dict[str, Any]]]:
        self._check(kind)
        with self._conn() as conn:
            found = conn.execute(
                f"SELECT name, parent, body FROM {kind} WHERE substr(name, 1, ?) = ? ORDER BY name",
                (len(prefix), prefix)).fetchall()
        return [(name, parent, json.loads(body)) for name, parent, body in found]

    def every(self, kind: str) -> list[dict[str, Any]]:
        self._check(kind)
        with self._conn() as conn:
            rows = conn.execute(f"SELECT body FROM {kind} ORDER BY name").fetchall()
        return [json.loads(r[0]) for r in rows]

    def put(self, kind: str, name: str, parent: str, body: dict[str, Any]) -> None:
        self._check(kind)
        with self._conn() as conn:
            conn.execute(
                f"INSERT INTO {kind}(name, parent, body) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET parent = excluded.parent, body = excluded.body",
                (name, parent, json.dumps(body)),
            )
        self._wrote(committed=not self._local.depth)

    def delete(self, kind: str, name: str) -> bool:
        self._check(kind)
        with self._conn() as conn:
            cur = conn.execute(f"DELETE FROM {kind} WHERE name = ?", (name,))
        self._wrote(committed=not self._local.depth)
        return cur.rowcount > 0

    def delete_children(self, kind: str, parent: str) -> int:
        self._check(kind)
        with self._conn() as conn:
            cur = conn.execute(f"DELETE FROM {kind} WHERE parent = ?", (parent,))
        self._wrote(committed=not self._local.depth)
        return int(cur.rowcount)

    def _wrote(self, committed: bool) -> None:
        """A write; every process is signalled once it is committed (a statement outside a
        transaction at once, one inside at the transaction's end), unless the transaction is
        quiet: then the change token stays (PRAGMA data_version, where there is no signal file,
        still changes for other connections)."""
        if self._local.quiet:
            return
        self._writes += 1
        if committed and self._signal is not None:
            self._signal.signal()

    def tokens_shared(self) -> bool:
        # The signal file's value and this process's write count are the same in every thread;
        # PRAGMA data_version (without the file) is per connection, and so per thread.
        return self._signal is not None

    def change_token(self) -> object | None:
        if self._signal is not None:
            return (self._signal.value(), self._writes)
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
