"""PostgreSQL behind the registry's Store, for several instances sharing one state (Cloud SQL in
production). Selected by MLEMU_DATABASE_URL=postgresql://USER:PASSWORD@HOST:PORT/DBNAME.

Schema: as in SQLite, one table per kind (`mlemu_<kind>`): name primary key, parent, and the JSON
body as text (kept byte for byte, key order included). Names sort in byte order (COLLATE "C"),
as SQLite sorts them, whatever the database's locale.

`transaction()` runs BEGIN and then takes one transaction-level advisory lock
(pg_advisory_xact_lock), so the read-check-write sequences of every thread, process and instance
run one at a time, like SQLite's BEGIN IMMEDIATE; COMMIT or ROLLBACK releases the lock, and so
does the server when a connection dies. It is reentrant per thread. Statements outside a
transaction are single autocommit statements, and reads never wait for the lock.

Connections come from registry/postgres_pool.py (a per-process psycopg_pool pool that survives
forks, dropped connections and an unreachable server); a thread keeps the one it took for the
whole of a transaction. A statement outside a transaction, or the BEGIN of one, that meets a
dropped connection is retried once on a new one.

The schema-version row lives in `mlemu_meta` (registry/store_base.py).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg

from core.errors import Unavailable
from registry.postgres_pool import POOL_SIZE, WAIT_S, Connections
from registry.store_base import KINDS, SCHEMA_KEY, SCHEMA_VERSION, Store, check_schema

#: The advisory lock key every mlemu process takes for a transaction (advisory locks are per
#: database, so two mlemu deployments in different databases do not contend).
LOCK_KEY = 0x6D6C656D75  # "mlemu"

T = TypeVar("T")


class PostgresStore(Store):
    """The Store on a PostgreSQL database shared by every process of every instance."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self._conns = Connections(url, pool_size)
        self.where = self._conns.where
        # The schema on a connection of its own: an unreachable server fails here at once, with
        # the driver's reason, before any pool thread starts.
        conn = self._conns.connect()
        try:
            self._create_schema(conn)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self._conns.open()

    def _create_schema(self, conn: psycopg.Connection[Any]) -> None:
        # Under the write lock: concurrent CREATE TABLE IF NOT EXISTS can clash.
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            for kind in KINDS:
                conn.execute(
                    f'CREATE TABLE IF NOT EXISTS mlemu_{kind} (name TEXT COLLATE "C" PRIMARY KEY,'
                    ' parent TEXT COLLATE "C" NOT NULL, body TEXT NOT NULL)'.encode())
                conn.execute(f"CREATE INDEX IF NOT EXISTS mlemu_{kind}_parent "
                             f"ON mlemu_{kind} (parent, name)".encode())
            conn.execute(b"CREATE TABLE IF NOT EXISTS mlemu_meta "
                         b'(key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL)')
            if check_schema(self._meta(conn), self.where):
                conn.execute("INSERT INTO mlemu_meta (key, value) VALUES (%s, %s)",
                             (SCHEMA_KEY, str(SCHEMA_VERSION)))

    @staticmethod
    def _meta(conn: psycopg.Connection[Any]) -> str | None:
        row = conn.execute("SELECT value FROM mlemu_meta WHERE key = %s", (SCHEMA_KEY,)).fetchone()
        return row[0] if row else None

    def schema_version(self) -> int | None:
        value = self._with_connection(self._meta)
        return int(value) if value is not None and value.isdigit() else None

    # --- connections ---------------------------------------------------------------------------

    def _unavailable(self, exc: Exception) -> Unavailable:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Unavailable(f"The database {self.where} is unavailable: {detail}")

    def _with_connection(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run `fn` on this thread's transaction connection, or on a pooled one (retried once
        on a fresh connection if the pooled one turns out to be dead)."""
        self._conns.after_fork()
        held: psycopg.Connection[Any] | None = getattr(self._conns.local, "conn", None)
        if held is not None:
            try:
                return fn(held)
            except psycopg.OperationalError as exc:
                raise self._unavailable(exc) from None
        for attempt in (1, 2):
            conn = self._conns.acquire(fresh=attempt == 2)
            try:
                return fn(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2 or not conn.broken:
                    raise self._unavailable(exc) from None
            finally:
                self._conns.release(conn)
        raise AssertionError("unreachable")

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        def run(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            # SQL built from the KINDS whitelist only; values always go as parameters.
            cur = conn.execute(sql.encode(), params)
            return cur.fetchall() if cur.description is not None else []

        return self._with_connection(run)

    # --- Store ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, quiet: bool = False) -> Iterator[None]:
        # `quiet` changes nothing here: this backend has no change token (readers never cache).
        self._conns.after_fork()
        local = self._conns.local
        if getattr(local, "conn", None) is not None:
            yield  # nested: the outer transaction commits or rolls back
            return
        conn = self._begin()
        local.conn = conn
        try:
            yield
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
            raise
        else:
            try:
                conn.execute("COMMIT")
            except psycopg.OperationalError as exc:
                raise self._unavailable(exc) from None
        finally:
            local.conn = None
            self._conns.release(conn)

    def _begin(self) -> psycopg.Connection[Any]:
        """A pooled connection inside BEGIN, holding the write lock."""
        for attempt in (1, 2):
            conn = self._conns.acquire(fresh=attempt == 2)
            try:
                conn.execute("BEGIN")
                conn.execute(f"SET LOCAL lock_timeout = '{int(WAIT_S * 1000)}ms'".encode())
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                return conn
            except psycopg.errors.LockNotAvailable:
                self._abandon(conn)
                raise Unavailable(f"Timed out after {WAIT_S:.0f} s waiting for the write lock "
                                  f"of {self.where}.") from None
            except psycopg.OperationalError as exc:
                broken = conn.broken
                self._abandon(conn)
                if attempt == 2 or not broken:  # a dead pooled connection is retried once
                    raise self._unavailable(exc) from None
            except BaseException:
                self._abandon(conn)
                raise
        raise AssertionError("unreachable")

    def _abandon(self, conn: psycopg.Connection[Any]) -> None:
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
        self._conns.release(conn)

    def _check(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        self._check(kind)
        rows = self._execute(f"SELECT body FROM mlemu_{kind} WHERE name = %s", (name,))
        return json.loads(rows[0][0]) if rows else None

    def children(self, kind: str, parent: str) -> list[dict[str, Any]]:
        self._check(kind)
        rows = self._execute(
            f"SELECT body FROM mlemu_{kind} WHERE parent = %s ORDER BY name", (parent,))
        return [json.loads(r[0]) for r in rows]

    def child_names(self, kind: str, parent: str) -> list[str]:
        self._check(kind)
        rows = self._execute(
            f"SELECT name FROM mlemu_{kind} WHERE parent = %s ORDER BY name", (parent,))
        return [r[0] for r in rows]

    def rows(self, kind: str, prefix: str = "") -> list[tuple[str, str, dict[str, Any]]]:
        self._check(kind)
        found = self._execute(
            f"SELECT name, parent, body FROM mlemu_{kind} WHERE left(name, %s) = %s ORDER BY name",
            (len(prefix), prefix))
        return [(name, parent, json.loads(body)) for name, parent, body in found]

    def every(self, kind: str) -> list[dict[str, Any]]:
        self._check(kind)
        rows = self._execute(f"SELECT body FROM mlemu_{kind} ORDER BY name", ())
        return [json.loads(r[0]) for r in rows]

    def put(self, kind: str, name: str, parent: str, body: dict[str, Any]) -> None:
        self._check(kind)
        self._execute(
            f"INSERT INTO mlemu_{kind} (name, parent, body) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET parent = excluded.parent, body = excluded.body",
            (name, parent, json.dumps(body)))

    def delete(self, kind: str, name: str) -> bool:
        self._check(kind)
        rows = self._execute(f"DELETE FROM mlemu_{kind} WHERE name = %s RETURNING 1", (name,))
        return bool(rows)

    def delete_children(self, kind: str, parent: str) -> int:
        self._check(kind)
        return len(self._execute(f"DELETE FROM mlemu_{kind} WHERE parent = %s RETURNING 1",
                                 (parent,)))

    def close(self) -> None:
        """Close this process's connections (a later call opens a new pool)."""
        self._conns.close()
