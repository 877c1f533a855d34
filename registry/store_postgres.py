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

Connections come from a per-process `psycopg_pool.ConnectionPool`; a thread keeps the one it took
for the whole of a transaction. After a fork the child opens its own pool and never touches the
parent's (closing its connections would end the parent's sessions; its worker threads do not
exist in the child). A connection the server or the network dropped is discarded by the pool; a
statement outside a transaction, or the BEGIN of one, is retried once on a connection opened
there and then, so a server restart costs no request and an unreachable server raises
`Unavailable` naming the database (not the password) at once, rather than after the pool's
wait. The schema-version row lives in `mlemu_meta` (registry/store_base.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from errors import Unavailable
from registry.store_base import KINDS, SCHEMA_KEY, SCHEMA_VERSION, Store, check_schema

#: Connections one process's pool may hold at once (gunicorn threads share them; a statement is
#: short).
POOL_SIZE = 5
#: How long a caller waits for a free pooled connection, or for the write lock.
WAIT_S = 30.0
CONNECT_TIMEOUT_S = 10
#: Our transactions last milliseconds; a session idle inside one this long has lost its client.
IDLE_IN_TRANSACTION_S = 60
#: The advisory lock key every mlemu process takes for a transaction (advisory locks are per
#: database, so two mlemu deployments in different databases do not contend).
LOCK_KEY = 0x6D6C656D75  # "mlemu"

T = TypeVar("T")


class _Pool(ConnectionPool):
    """psycopg_pool's pool, stopped from a thread of its own when garbage-collected.

    A store dropped without close() frees its pool wherever the last reference goes, which can
    be one of the pool's worker threads (a maintenance task there held it); ConnectionPool's
    __del__ joins every worker, so there it would try to join the thread it runs on.
    """

    def __del__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            super().__del__()
            return
        with contextlib.suppress(RuntimeError):  # no new threads at interpreter shutdown
            threading.Thread(target=ConnectionPool.__del__, args=(self,), daemon=True).start()


def describe(url: str) -> str:
    """`url` without its password, for messages."""
    try:
        info = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparseable URL)"
    user = f"{info['user']}@" if info.get("user") else ""
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{info.get('host', '')}{port}/{info.get('dbname', '')}"


class PostgresStore(Store):
    """The Store on a PostgreSQL database shared by every process of every instance."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self.where = describe(url)
        self._options: dict[str, Any] = {"autocommit": True, "application_name": "mlemu"}
        try:
            if "connect_timeout" not in conninfo.conninfo_to_dict(url):
                self._options["connect_timeout"] = CONNECT_TIMEOUT_S
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"MLEMU_DATABASE_URL is not a valid PostgreSQL URL: {exc}") from None
        self._pool_size = pool_size
        #: Pools inherited through a fork: kept referenced, never used or closed, so that
        #: neither garbage collection nor close() ends the parent's sessions from the child.
        self._inherited: list[Any] = []
        # The schema on a connection of its own: an unreachable server fails here at once, with
        # the driver's reason, before any pool thread starts.
        conn = self._connect()
        try:
            self._create_schema(conn)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self._open_pool()

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

    def _open_pool(self) -> None:
        self._pid = os.getpid()
        self._local = threading.local()
        #: Connections opened outside the pool for a retry: closed after use, not pooled.
        self._direct: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
        # One connection kept open, more (up to pool_size) while threads need them; they open
        # lazily, on the pool's own threads.
        self._pool = _Pool(
            self.url, kwargs=self._options, min_size=1, max_size=self._pool_size,
            configure=self._configure, timeout=WAIT_S, name="mlemu", open=True)

    def _after_fork(self) -> None:
        if self._pid != os.getpid():
            self._inherited.append(self._pool)
            held = getattr(self._local, "conn", None)
            if held is not None:
                self._inherited.append(held)
            self._open_pool()

    def _unavailable(self, exc: Exception) -> Unavailable:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Unavailable(f"The database {self.where} is unavailable: {detail}")

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        # An instance that vanishes mid-transaction (host lost, no FIN) would hold the write
        # lock until TCP gave up; the server ends such a session, and frees the lock, first.
        conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_S}s'"
                     .encode())

    def _connect(self) -> psycopg.Connection[Any]:
        """A connection outside the pool (the schema, and the retry after a dropped one)."""
        try:
            conn = psycopg.connect(self.url, **self._options)
            self._configure(conn)
            return conn
        except psycopg.OperationalError as exc:
            raise Unavailable(f"Cannot connect to the database {self.where} (MLEMU_DATABASE_URL): "
                              f"{str(exc).strip()}") from None

    def _acquire(self, fresh: bool = False) -> psycopg.Connection[Any]:
        """A pooled connection, or (`fresh`: retrying after a dropped one) a new one of its own.

        After a dropped connection the pool's other idle ones are likely dead too (a server
        restart ends them all), so they are drained and the retry connects directly: the pool
        would otherwise hand out the next dead one, or make the caller wait while it reconnects.
        """
        self._after_fork()
        if fresh:
            self._pool.drain()
            conn = self._connect()
            self._direct.add(conn)
            return conn
        try:
            return self._pool.getconn()
        except PoolTimeout:
            # No connection came within WAIT_S: all busy, or the server cannot be reached (the
            # pool keeps retrying in the background); a direct attempt tells which, and why.
            conn = self._connect()
            with contextlib.suppress(psycopg.Error):
                conn.close()
            raise Unavailable(f"All {self._pool_size} connections to {self.where} stayed busy "
                              f"for {WAIT_S:.0f} s.") from None

    def _release(self, conn: psycopg.Connection[Any]) -> None:
        if conn in self._direct:
            self._direct.discard(conn)
            with contextlib.suppress(psycopg.Error):
                conn.close()
        else:
            self._pool.putconn(conn)  # the pool discards it if broken or left in a transaction

    def _with_connection(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run `fn` on this thread's transaction connection, or on a pooled one (retried once
        on a fresh connection if the pooled one turns out to be dead)."""
        self._after_fork()
        held: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if held is not None:
            try:
                return fn(held)
            except psycopg.OperationalError as exc:
                raise self._unavailable(exc) from None
        for attempt in (1, 2):
            conn = self._acquire(fresh=attempt == 2)
            try:
                return fn(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2 or not conn.broken:
                    raise self._unavailable(exc) from None
            finally:
                self._release(conn)
        raise AssertionError("unreachable")

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        def run(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            # SQL built from the KINDS whitelist only; values always go as parameters.
            cur = conn.execute(sql.encode(), params)
            return cur.fetchall() if cur.description is not None else []

        return self._with_connection(run)

    # --- Store ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self._after_fork()
        local = self._local
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
            self._release(conn)

    def _begin(self) -> psycopg.Connection[Any]:
        """A pooled connection inside BEGIN, holding the write lock."""
        for attempt in (1, 2):
            conn = self._acquire(fresh=attempt == 2)
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
        self._release(conn)

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

    def close(self) -> None:
        """Close this process's connections (a later call opens a new pool)."""
        if self._pid != os.getpid():
            return
        self._pool.close()
        self._pid = 0  # the next use opens a pool again, as after a fork (nothing to inherit)
