"""Request-response log rows kept in mlemu's own store: bounded in total, read newest first
without loading the rest, deleted with their version.

Rows are documents of kind `request_logs`, each a child of its version, named
`<version>/requestLogs/<sequence>`. One index document lists every kept row, oldest first, as
(version, sequence, bytes): appending a batch of rows (one transaction, however many processes
write) drops the oldest rows until the kept total is within the store's budget
(MLEMU_REQUEST_LOG_MAX_BYTES) and MAX_ROWS, so rows never grow the state directory without
bound; reading a version's newest N rows fetches those N by name. The real service writes to a
BigQuery table whose retention is the table owner's to set; a local table needs one of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.store_base import Store

KIND = "request_logs"
INDEX = "requestLogs:index"
#: The index's parent: apart from every version's rows (and from "", which readiness lists).
INDEX_PARENT = "requestLogs"
#: Rows kept at most, whatever their size (it bounds the index document too).
MAX_ROWS = 10_000

#: (version name, row, its size in bytes)
Row = tuple[str, dict[str, Any], int]


def row_name(version_name: str, sequence: int) -> str:
    return f"{version_name}/requestLogs/{sequence:012d}"


def _index(store: Store) -> dict[str, Any]:
    index = store.get(KIND, INDEX)
    return index if index is not None else {"next": 0, "rows": []}


def append(store: Store, rows: Iterable[Row], max_bytes: int) -> int:
    """Store `rows`, then drop the oldest kept rows beyond `max_bytes` in all (or MAX_ROWS);
    how many rows were dropped. A row larger than `max_bytes` on its own is not stored."""
    dropped = 0
    with store.transaction():
        index = _index(store)
        kept: list[list[Any]] = index["rows"]
        sequence = int(index["next"])
        for version_name, row, size in rows:
            if size > max_bytes:
                dropped += 1
                continue
            store.put(KIND, row_name(version_name, sequence), version_name, row)
            kept.append([version_name, sequence, size])
            sequence += 1
        total = sum(entry[2] for entry in kept)
        oldest = 0
        while oldest < len(kept) and (total > max_bytes or len(kept) - oldest > MAX_ROWS):
            version_name, old, size = kept[oldest]
            store.delete(KIND, row_name(version_name, old))
            total -= size
            oldest += 1
        store.put(KIND, INDEX, INDEX_PARENT, {"next": sequence, "rows": kept[oldest:]})
    return dropped + oldest


def newest(store: Store, version_names: list[str], limit: int) -> Iterator[dict[str, Any]]:
    """The newest `limit` rows of these versions (0: all), oldest first, fetched one at a time
    (only those are read). A store written before the index existed is read the old way."""
    index = store.get(KIND, INDEX)
    if index is None:
        legacy = sorted((row for name in version_names for row in store.children(KIND, name)),
                        key=lambda row: str(row.get("time")))
        yield from legacy[-limit:] if limit > 0 else legacy
        return
    wanted = set(version_names)
    entries = [entry for entry in index["rows"] if entry[0] in wanted]
    for version_name, sequence, _ in entries[-limit:] if limit > 0 else entries:
        row = store.get(KIND, row_name(version_name, sequence))
        if row is not None:  # dropped meanwhile by a writer's retention
            yield row


def forget(store: Store, version_name: str) -> None:
    """Delete a version's rows (in the transaction that deletes the version)."""
    with store.transaction():
        store.delete_children(KIND, version_name)
        index = store.get(KIND, INDEX)
        if index is not None:
            index["rows"] = [entry for entry in index["rows"] if entry[0] != version_name]
            store.put(KIND, INDEX, INDEX_PARENT, index)
