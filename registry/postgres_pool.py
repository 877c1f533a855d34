"""The PostgreSQL store's connections: one psycopg_pool pool per process, kept right across forks,
dropped connections and an unreachable server.

Connections come from a per-process `psycopg_pool.ConnectionPool`. After a fork the child opens its
own pool and never touches the parent's (closing its connections would end the parent's sessions;
its worker threads do not exist in the child). A connection the server or the network dropped is
discarded by the pool; a statement outside a transaction, or the BEGIN of one, is retried once on a
connection opened there and then, and every call connects directly like that until the server
answers again (then a new pool replaces the old one, whose reconnection may be backing off). So a
server restart costs no request, and while the server is unreachable each call raises `Unavailable`
naming the database (not the password) at once, rather than after the pool's wait.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from core.errors import Unavailable

#: Connections one process's pool may hold at once (gunicorn threads share them; a statement is
#: short).
POOL_SIZE = 5
#: How long a caller waits for a free pooled connection, or for the write lock.
WAIT_S = 30.0
CONNECT_TIMEOUT_S = 10
#: Our transactions last milliseconds; a session idle inside one this long has lost its client.
IDLE_IN_TRANSACTION_S = 60


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


class Connections:
    """This process's connections to one database: `acquire` one (pooled, or direct while the
    pool is suspect), `release` it back where it came from; `local` is per thread and process."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self.where = describe(url)
        self._options: dict[str, Any] = {"autocommit": True, "application_name": "mlemu"}
        try:
            if "connect_timeout" not in conninfo.conninfo_to_dict(url):
                self._options["connect_timeout"] = CONNECT_TIMEOUT_S
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"MLEMU_DATABASE_URL is not a valid PostgreSQL URL: {exc}") from None
        self.pool_size = pool_size
        #: Pools inherited through a fork: kept referenced, never used or closed, so that
        #: neither garbage collection nor close() ends the parent's sessions from the child.
        self._inherited: list[Any] = []
        self._pid = 0  # no pool yet: `open` (or the first use) starts one

    def open(self) -> None:
        self.after_fork()

    def _open_pool(self) -> None:
        self._pid = os.getpid()
        self.local = threading.local()
        #: Connection -> the pool it came from (absent: opened directly, closed after use). A
        #: connection goes back to its own pool even if the store has started a new one since.
        self._origin: weakref.WeakKeyDictionary[psycopg.Connection[Any], ConnectionPool] = \
            weakref.WeakKeyDictionary()
        self._origin_guard = threading.Lock()
        #: Set when a pooled connection turned out dropped: until a direct connection succeeds,
        #: callers connect directly (failing at once while the server is down) instead of
        #: waiting on a pool that reconnects with growing back-off.
        self._suspect = False
        self._pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool:
        # One connection kept open, more (up to pool_size) while threads need them; they open
        # on the pool's own threads.
        return _Pool(self.url, kwargs=self._options, min_size=1, max_size=self.pool_size,
                     configure=self._configure, timeout=WAIT_S, name="mlemu", open=True)

    def _renew_pool(self) -> None:
        """The server answers again after a dropped connection: a new pool connects now (the
        old one's reconnection may be backing off); the old one closes on a thread of its own,
        taking back what is still checked out of it."""
        with self._origin_guard:
            if not self._suspect:
                return
            old, self._pool = self._pool, self._new_pool()
            self._suspect = False
        threading.Thread(target=old.close, name="mlemu-pool-close", daemon=True).start()

    def after_fork(self) -> None:
        """Start this process's pool if it has none (first use, or the first call in a forked
        child, whose inherited pool is kept, unused)."""
        if self._pid != os.getpid():
            if self._pid:  # forked: keep the parent's pool and held connection, untouched
                self._inherited.append(self._pool)
                held = getattr(self.local, "conn", None)
                if held is not None:
                    self._inherited.append(held)
            self._open_pool()

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        # An instance that vanishes mid-transaction (host lost, no FIN) would hold the write
        # lock until TCP gave up; the server ends such a session, and frees the lock, first.
        conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_S}s'"
                     .encode())

    def connect(self) -> psycopg.Connection[Any]:
        """A connection outside the pool (the schema, and the retry after a dropped one)."""
        try:
            conn = psycopg.connect(self.url, **self._options)
            self._configure(conn)
            return conn
        except psycopg.OperationalError as exc:
            raise Unavailable(f"Cannot connect to the database {self.where} (MLEMU_DATABASE_URL): "
                              f"{str(exc).strip()}") from None

    def acquire(self, fresh: bool = False) -> psycopg.Connection[Any]:
        """A pooled connection, or (`fresh`: retrying after a dropped one) a new one of its own.

        After a dropped connection the pool's other connections are likely dead too (a server
        restart ends them all): the retry, and every call until the server answers again,
        connects directly, so an unreachable server is reported at once; the first direct
        connection that succeeds starts a new pool.
        """
        self.after_fork()
        if fresh:
            self._suspect = True
        if self._suspect:
            conn = self.connect()  # raises Unavailable("Cannot connect ...") while down
            self._renew_pool()
            return conn
        pool = self._pool
        try:
            conn = pool.getconn()
        except PoolTimeout:
            # No connection came within WAIT_S: all busy, or the server cannot be reached (the
            # pool keeps retrying in the background); a direct attempt tells which, and why.
            self.connect().close()
            raise Unavailable(f"All {self.pool_size} connections to {self.where} stayed busy "
                              f"for {WAIT_S:.0f} s.") from None
        with self._origin_guard:
            self._origin[conn] = pool
        return conn

    def release(self, conn: psycopg.Connection[Any]) -> None:
        with self._origin_guard:
            pool = self._origin.pop(conn, None)
        if pool is None:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        else:
            pool.putconn(conn)  # the pool discards it if broken or left in a transaction

    def close(self) -> None:
        """Close this process's connections (a later use opens a new pool)."""
        if self._pid != os.getpid():
            return
        self._pool.close()
        self._pid = 0  # the next use opens a pool again, as after a fork (nothing to inherit)
