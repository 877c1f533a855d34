"""The request journal: a bounded record of recent requests across every process of one server.

Each process appends one JSON line per request to a file of its own (`STATE_DIR/journal/
<pid>.jsonl`, written through a memory mapping: controls/journal_file.py says why; no lock shared
with other processes). A process keeps its file under `max_bytes`: past that it renames it to
`<pid>.old` (replacing the previous one) and starts a new one, so a process holds at most twice
that. Reading merges every file, newest last, and keeps the last `max_rows`. Clearing removes the
`.old` files and the files of processes that are gone; a live process's file cannot be cut short
under its writer's mapping, so clearing records where it ended (`<pid>.cleared`: the file's inode
and length) and reading skips what came before.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from controls.journal_file import AppendFile, content
from core.errors import InvalidArgument

#: Query parameters a listing filters on (exact match), and `since` (an RFC 3339 time).
FILTERS = ("protocol", "method", "transport", "project", "model", "version", "endpoint",
           "deployedModel", "caller", "status", "path")
MAX_ROWS = 1_000
MAX_BYTES = 4 << 20
#: Largest recorded body, when bodies are recorded at all (journal settings).
MAX_BODY_BYTES = 64 << 10


def rfc3339(seconds: float) -> str:
    stamp = datetime.fromtimestamp(seconds, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond:06d}Z"


def parse_time(text: str) -> float:
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"since={text!r} is not an RFC 3339 time "
                              "(e.g. 2026-11-28T16:00:00Z).") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


#: This process's id, renewed in a forked child: a system call per request is what it saves.
_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Journal:
    def __init__(self, directory: Path, *, max_rows: int = MAX_ROWS, max_bytes: int = MAX_BYTES):
        self.directory = directory
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._out: AppendFile | None = None
        self._pid = 0
        directory.mkdir(parents=True, exist_ok=True)

    def _file(self) -> AppendFile:
        pid = _PID[0]
        if self._out is None or self._pid != pid:  # a forked worker writes a file of its own
            if self._out is not None:
                self._out.close()  # the parent's, as inherited: the parent keeps its own
                self._out = None
            self._out = AppendFile(self.directory / f"{pid}.jsonl", self.max_bytes)
            self._pid = pid
        return self._out

    def record(self, entry: dict[str, Any]) -> None:
        """Append one request's entry (never raises: the journal must not fail a request)."""
        try:
            line = orjson.dumps(entry, default=str, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # orjson's limits (an integer beyond 64 bits): not worth a request
            return
        if len(line) > self.max_bytes // 4:  # bodies are capped; this is a last bound
            return
        with self._lock:
            try:
                out = self._file()
                if out.end + len(line) > self.max_bytes:
                    stem = self.directory / str(self._pid)
                    # A clear's mark names the inode: it goes on applying to the .old file.
                    os.replace(stem.with_suffix(".jsonl"), stem.with_suffix(".old"))
                    out.close()
                    self._out = None
                    out = self._file()
                out.write(line)
            except (OSError, ValueError):  # a full disk, a removed directory: try again later
                self._out = None

    def _paths(self) -> list[Path]:
        return sorted(p for p in self.directory.iterdir() if p.suffix in (".jsonl", ".old"))

    def entries(self, filters: dict[str, str], since: float | None = None,
                limit: int | None = None) -> list[dict[str, Any]]:
        """Recorded entries matching every filter (exact, as text), oldest first."""
        rows: list[dict[str, Any]] = []
        for path in self._paths():
            rows.extend(self._read(path))
        rows.sort(key=lambda row: row.get("timestamp", 0.0))
        for row in rows:  # formatted when read: the request path only stores the number
            row["time"] = rfc3339(float(row.get("timestamp", 0.0)))
        rows = rows[-self.max_rows:]
        wanted = [(key, str(value)) for key, value in filters.items()]
        out = [row for row in rows
               if all(str(row.get(key, "")) == value for key, value in wanted)
               and (since is None or row.get("timestamp", 0.0) >= since)]
        return out[-limit:] if limit else out

    def _cleared_at(self, path: Path) -> int:
        """How many of `path`'s bytes a clear left behind (0 if it was not cleared since the
        file was made: the mark names the inode it was taken of, which a rotation keeps as the
        `.old` file)."""
        try:
            inode, length = (self.directory / f"{path.stem}.cleared").read_text().split()
            return int(length) if int(inode) == path.stat().st_ino else 0
        except (OSError, ValueError):
            return 0

    def _read(self, path: Path) -> Iterable[dict[str, Any]]:
        data = content(path)[self._cleared_at(path):]
        rows = []
        for line in data.splitlines():
            with contextlib.suppress(ValueError):  # a line being written as it was read
                row = json.loads(line)
                if isinstance(row, dict):
                    rows.append(row)
        return rows

    def clear(self) -> None:
        """Forget every entry; files of processes that are gone are removed."""
        with self._lock:
            for path in self._paths():
                with contextlib.suppress(OSError):
                    pid = int(path.stem) if path.stem.isdigit() else 0
                    if path.suffix == ".old" or not _alive(pid):
                        path.unlink()
                        if path.suffix == ".jsonl":  # a live process's .jsonl keeps its mark
                            (self.directory / f"{path.stem}.cleared").unlink(missing_ok=True)
                    else:
                        mark = self.directory / f"{path.stem}.cleared"
                        staged = mark.with_suffix(".staged")
                        staged.write_text(f"{path.stat().st_ino} {len(content(path))}")
                        os.replace(staged, mark)  # a reader sees the old mark or the new


def entry(*, protocol: str, method: str, transport: str, path: str, status: str,
          started: float, seconds: float, caller: str, project: str, model: str, version: str,
          instances: int, endpoint: str = "", deployed_model: str = "") -> dict[str, Any]:
    """One journal row; `started` is time.time() when the request began."""
    row: dict[str, Any] = {
        "timestamp": started, "protocol": protocol, "method": method,
        "transport": transport, "path": path,
        "status": int(status) if status.isdigit() else status,
        "latencyMs": round(seconds * 1000.0, 3), "caller": caller, "project": project,
        "model": model, "version": version,
    }
    if endpoint:
        row["endpoint"] = endpoint
    if deployed_model:
        row["deployedModel"] = deployed_model
    if instances >= 0:
        row["instanceCount"] = instances
    return row


def now() -> float:
    return time.time()
