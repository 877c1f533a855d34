"""The controls database: fault rules with their counts, timing rules, operation poll counts and
journal settings, shared by every worker and gRPC process of one server through one SQLite file
in the state directory.

Why not the resource store: controls belong to this server, not to the emulated service (they
are not exported in snapshots, and a PostgreSQL store shared by several servers must not give one
server's test faults to another), and the predict path must learn "no rule changed" without a
query. The latter is registry/change_signal.py's shared word, beside this file: every committed
change renews it, a process re-reads its rules only when the word differs from what it saw.
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

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS faults (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL,"
    " hits INTEGER NOT NULL DEFAULT 0, evaluations INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS timing (operation_type TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS polls (operation TEXT PRIMARY KEY, count INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS config (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


class ControlsDb:
    """One SQLite file; a connection per thread (reopened after a fork)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._signal = ChangeSignal.open(path.with_name(path.name + "-changes"))
        #: Renewed by this process's own changes where there is no shared signal file.
        self._own = 0
        with self.transaction() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)

    def _conn(self) -> sqlite3.Connection:
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None or getattr(local, "pid", None) != os.getpid():
            try:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                # Controls are test settings, not user data: a crash may lose the last change.
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise Unavailable(f"The controls database cannot be used: {exc}.") from None
            local.conn, local.pid = conn, os.getpid()
        return conn

    @contextlib.contextmanager
    def transaction(self, *, changes: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction; `changes`: every process re-reads its cached controls after it."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise Unavailable(f"The controls database cannot be used: {exc}.") from None
        if changes:
            self.signal()

    def signal(self) -> None:
        self._own += 1
        if self._signal is not None:
            self._signal.signal()

    def token(self) -> tuple[int, int]:
        """Differs after any process's committed change (no query, no system call)."""
        return (self._signal.value() if self._signal is not None else 0, self._own)

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn().execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise Unavailable(f"The controls database cannot be used: {exc}.") from None

    # --- config: small JSON values by key ----------------------------------------------------

    def get_config(self, key: str) -> Any:
        rows = self.query("SELECT value FROM config WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def set_config(self, key: str, value: Any) -> None:
        with self.transaction() as conn:
            if value is None:
                conn.execute("DELETE FROM config WHERE key = ?", (key,))
            else:
                conn.execute("INSERT INTO config(key, value) VALUES (?, ?) ON CONFLICT(key) DO "
                             "UPDATE SET value = excluded.value", (key, json.dumps(value)))

    def clear(self) -> None:
        """Every rule, count and setting gone (a reset)."""
        with self.transaction() as conn:
            for table in ("faults", "timing", "polls", "config"):
                conn.execute(f"DELETE FROM {table}")  # noqa: S608 - a fixed table name

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
