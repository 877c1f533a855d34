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

Connections come from a small per-process pool; a thread keeps the one it took for the whole of a
transaction. After a fork the child opens its own connections and never closes the parent's
(closing them would end the parent's sessions). A connection the server or the network dropped
is discarded; a statement outside a transaction, or the BEGIN of one, is retried once on a new
connection. An unreachable server raises `Unavailable` naming the database (not the password).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo

from errors import Unavailable
from registry.store import KINDS, Store

#: Connections one process may hold at once (gunicorn threads share them; a statement is short).
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
        self._reset_pool()
        self._inherited: list[psycopg.Connection[Any]] = []
        with self.transaction():  # under the lock: concurrent CREATE TABLE IF NOT EXISTS can clash
            for kind in KINDS:
                self._execute(
                    f'CREATE TABLE IF NOT EXISTS mlemu_{kind} (name TEXT COLLATE "C" PRIMARY KEY,'
                    ' parent TEXT COLLATE "C" NOT NULL, body TEXT NOT NULL)')
                self._execute(f"CREATE INDEX IF NOT EXISTS mlemu_{kind}_parent "
                              f"ON mlemu_{kind} (parent, name)")

    # --- connections ---------------------------------------------------------------------------

    def _reset_pool(self) -> None:
        self._pid = os.getpid()
        self._idle: list[psycopg.Connection[Any]] = []
        self._slots = threading.BoundedSemaphore(self._pool_size)
        self._guard = threading.Lock()
        self._local = threading.local()

    def _after_fork(self) -> None:
        if self._pid != os.getpid():
            # Keep the parent's connections referenced so they are never closed from here.
            self._inherited.extend(self._idle)
            held = getattr(self._local, "conn", None)
            if held is not None:
                self._inherited.append(held)
            self._reset_pool()

    def _unavailable(self, exc: Exception) -> Unavailable:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Unavailable(f"The database {self.where} is unavailable: {detail}")

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self.url, **self._options)
            # An instance that vanishes mid-transaction (host lost, no FIN) would hold the write
            # lock until TCP gave up; the server ends such a session, and frees the lock, first.
            conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_S}s'"
                         .encode())
            return conn
        except psycopg.OperationalError as exc:
            raise Unavailable(f"Cannot connect to the database {self.where} (MLEMU_DATABASE_URL): "
                              f"{str(exc).strip()}") from None

    def _acquire(self) -> psycopg.Connection[Any]:
        self._after_fork()
        if not self._slots.acquire(timeout=WAIT_S):
            raise Unavailable(f"All {self._pool_size} connections to {self.where} stayed busy "
                              f"for {WAIT_S:.0f} s.")
        try:
            with self._guard:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed or conn.broken:
                conn = self._connect()
        except BaseException:
            self._slots.release()
            raise
        return conn

    def _release(self, conn: psycopg.Connection[Any]) -> None:
        reusable = not conn.closed and not conn.broken and \
            conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if reusable:
            with self._guard:
                self._idle.append(conn)
        else:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self._slots.release()

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
            conn = self._acquire()
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
            conn = self._acquire()
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
        """Close this process's idle connections."""
        if self._pid != os.getpid():
            return
        with self._guard:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(psycopg.Error):
                conn.close()
