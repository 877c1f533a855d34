"""Stored rows of another layout still read (issue 14): a store written before the schema-version
row existed gets one, and a document with a field this code does not know, or without one it
expects, reads with defaults and a warning instead of making every read of its kind raise."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from registry import tasks
from registry.store import SqliteStore
from registry.store_base import KINDS, SCHEMA_VERSION

P = "projects/p"


def _old_layout(path: Path, rows: dict[str, list[tuple[str, str, dict]]]) -> None:
    """A state file as the code before the schema-version row wrote it: one table per kind
    (name, parent, JSON body) and nothing else."""
    conn = sqlite3.connect(path)
    for kind in KINDS:
        conn.execute(f"CREATE TABLE {kind} (name TEXT PRIMARY KEY, parent TEXT NOT NULL,"
                     " body TEXT NOT NULL)")
        conn.execute(f"CREATE INDEX {kind}_parent ON {kind}(parent, name)")
    for kind, items in rows.items():
        for name, parent, body in items:
            conn.execute(f"INSERT INTO {kind}(name, parent, body) VALUES (?, ?, ?)",
                         (name, parent, json.dumps(body)))
    conn.commit()
    conn.close()


def test_rows_of_the_previous_layout_read_and_the_schema_row_is_added(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mlemu.sqlite3"
    model = f"{P}/models/m"
    version = f"{model}/versions/v1"
    _old_layout(path, {
        # As Model.storage() wrote it, plus a field a later (or earlier) layout had.
        "models": [(model, P, {
            "name": model, "description": "old", "default_version": "v1", "regions": [],
            "online_prediction_logging": False, "online_prediction_console_logging": False,
            "labels": {"team": "a"}, "etag": "e1", "create_time": "2024-01-01T00:00:00Z",
            "serving": {}, "extra": {}, "retired_field_of_an_old_layout": 1})],
        # A version without the fields added since (uid, serving, last_use_time).
        "versions": [(version, model, {
            "name": version, "deployment_uri": "/models/m", "framework": "SCIKIT_LEARN",
            "prediction_class": "", "package_uris": [], "runtime_version": "2.11",
            "python_version": "3.7", "machine_type": "", "description": "", "labels": {},
            "state": "READY", "error_message": "", "create_time": "2024-01-01T00:00:00Z",
            "etag": "e2", "extra": {"autoScaling": {"minNodes": 1}}})],
        "operations": [(f"{P}/operations/create_m_v1-1", P, {
            "name": f"{P}/operations/create_m_v1-1", "metadata": {"operationType": "CREATE_VERSION"},
            "done": True, "error": None, "response": {"name": version}})],
        # A task without `attempts`, and without `args` (a required field: its empty value).
        "tasks": [("op-old", "tasks", {
            "name": "op-old", "type": "CREATE_VERSION", "target": version, "owner": "gone|x",
            "lease_until": 0.0})],
    })
    with caplog.at_level(logging.WARNING, logger="mlemu.store"):
        store = SqliteStore(path)
        got = store.get_model(model)
        assert got is not None and got.description == "old" and got.labels == {"team": "a"}
        assert got.default_version == "v1"
        [listed] = store.list_versions(model)
        assert listed.state == "READY" and listed.extra == {"autoScaling": {"minNodes": 1}}
        assert listed.uid and listed.last_use_time == "" and listed.serving == {}
        op = store.get_operation(f"{P}/operations/create_m_v1-1")
        assert op is not None and op.done and op.response == {"name": version}
        [task] = tasks.pending(store)
        assert task.attempts == 1 and task.args == {} and task.target == version
    warned = caplog.text
    assert "retired_field_of_an_old_layout" in warned and "Model" in warned
    assert "Task" in warned and "args" in warned  # fields with defaults need no warning
    # The store now records the layout that wrote it; old rows are rewritten in it as they change.
    assert store.schema_version() == SCHEMA_VERSION
    store.put_version(listed)
    assert store.get_version(version) == listed
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchall() == [(str(SCHEMA_VERSION),)]
        body = json.loads(conn.execute("SELECT body FROM versions").fetchone()[0])
    assert body["uid"] == listed.uid


def test_a_store_written_by_a_newer_layout_opens_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mlemu.sqlite3"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        conn.execute("INSERT INTO models(name, parent, body) VALUES (?, ?, ?)", (
            f"{P}/models/new", P, json.dumps({"name": f"{P}/models/new", "tier": "gold"})))
    with caplog.at_level(logging.WARNING, logger="mlemu.store"):
        store = SqliteStore(path)
        [model] = store.list_models(P)
    assert model.name == f"{P}/models/new" and model.description == ""
    assert "newer mlemu (schema version 99" in caplog.text and "tier" in caplog.text
    assert store.schema_version() == 99  # left as the newer code wrote it
