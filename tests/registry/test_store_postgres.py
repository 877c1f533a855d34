"""The PostgreSQL store against a real server (started by the tests): the same semantics as the
SQLite store (ordering, rollback, serialised read-check-write across connections and processes),
surviving dropped connections and forks, a clear error when the server is unreachable, and
exactly-once adoption of orphaned long-running operations by runners on separate connections."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from core.errors import Unavailable
from registry.resources import Model
from registry.store import SqliteStore, Store, open_store
from registry.store_base import SCHEMA_VERSION
from registry.store_postgres import PostgresStore
from tests.conftest import free_port
from tests.kit.taskrace import adopt_orphan_race

pytestmark = pytest.mark.slow


@pytest.fixture
def db_url(postgres: Any) -> str:
    return str(postgres.new_database())


def _fill(store: Store) -> None:
    for name in ("b", "B", "a_z", "a", "A-1", "ä"):
        store.put("models", f"projects/p/models/{name}", "projects/p", {"name": name, "n": [1, 2]})
    store.put("models", "projects/q/models/x", "projects/q", {"name": "x"})


def test_documents_behave_as_in_sqlite(db_url: str, tmp_path: Path) -> None:
    pg = open_store(db_url, tmp_path)
    assert isinstance(pg, PostgresStore)
    lite = SqliteStore(tmp_path / "s.db")
    for store in (pg, lite):
        _fill(store)
        store.put("models", "projects/p/models/b", "projects/p", {"name": "b", "v": 2, "a": 1})
    assert pg.children("models", "projects/p") == lite.children("models", "projects/p")
    assert [d["name"] for d in pg.children("models", "projects/p")] == ["A-1", "B", "a", "a_z", "b", "ä"]
    names = pg.child_names("models", "projects/p")  # the page chooser of models.list
    assert names == lite.child_names("models", "projects/p")
    assert [n.rsplit("/", 1)[1] for n in names] == ["A-1", "B", "a", "a_z", "b", "ä"]
    body = pg.get("models", "projects/p/models/b")
    assert body == {"name": "b", "v": 2, "a": 1} and list(body) == ["name", "v", "a"]  # order kept
    assert pg.get("models", "projects/p/models/none") is None
    assert pg.delete("models", "projects/p/models/b") and not pg.delete("models", "projects/p/models/b")
    with pytest.raises(ValueError, match="unknown kind"):
        pg.get("nope", "x")
    # A second store on the same database (another instance) sees the same documents.
    other = PostgresStore(db_url)
    assert other.children("models", "projects/q") == [{"name": "x"}]
    # Both backends record the layout that wrote them, once.
    assert pg.schema_version() == lite.schema_version() == other.schema_version() == SCHEMA_VERSION
    with psycopg.connect(db_url) as admin:
        assert admin.execute("SELECT count(*) FROM mlemu_meta").fetchone() == (1,)


def test_rollback_on_error_and_nested_transactions(db_url: str) -> None:
    store = PostgresStore(db_url)
    with pytest.raises(RuntimeError), store.transaction():
        store.put_model(Model(name="projects/p/models/a"))
        with store.transaction():  # reentrant: part of the outer transaction
            store.put_model(Model(name="projects/p/models/b"))
        assert store.get_model("projects/p/models/b") is not None  # visible inside
        raise RuntimeError("crash mid-write")
    assert store.list_models("projects/p") == []
    with store.transaction():
        store.put_model(Model(name="projects/p/models/c"))
        with store.transaction():
            store.put_model(Model(name="projects/p/models/d"))
    assert [m.name for m in PostgresStore(db_url).list_models("projects/p")] == [
        "projects/p/models/c", "projects/p/models/d"]


def test_transactions_serialise_read_check_write_across_stores(db_url: str) -> None:
    stores = [PostgresStore(db_url), PostgresStore(db_url)]  # as two instances would
    stores[0].put_model(Model(name="projects/p/models/counter", description="0"))

    def bump(store: Store) -> None:
        for _ in range(20):
            with store.transaction():
                model = store.get_model("projects/p/models/counter")
                assert model is not None
                time.sleep(0.001)  # widen the window a lost update would need
                model.description = str(int(model.description) + 1)
                store.put_model(model)

    threads = [threading.Thread(target=bump, args=(stores[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert stores[1].get_model("projects/p/models/counter").description == "80"  # type: ignore[union-attr]


def test_survives_dropped_connections_and_fork(db_url: str) -> None:
    store = PostgresStore(db_url)
    store.put_model(Model(name="projects/p/models/a"))
    with psycopg.connect(db_url, autocommit=True) as admin:  # what a server restart does
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name = 'mlemu' AND pid <> pg_backend_pid()")
    assert store.get_model("projects/p/models/a") is not None
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name = 'mlemu' AND pid <> pg_backend_pid()")
    with store.transaction():  # BEGIN on a dead pooled connection is retried on a new one
        store.put_model(Model(name="projects/p/models/b"))

    pid = os.fork()
    if pid == 0:  # the child writes through the inherited store object
        code = 1
        try:
            store.put_model(Model(name="projects/p/models/from-child"))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's pooled connection still works: the child did not close it.
    assert [m.name.rsplit("/", 1)[-1] for m in store.list_models("projects/p")] == [
        "a", "b", "from-child"]


def test_a_writer_killed_mid_transaction_leaves_nothing_and_no_lock(db_url: str) -> None:
    store = PostgresStore(db_url)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # another instance, killed while it holds the write lock mid-write
        try:
            with store.transaction():
                store.put_model(Model(name="projects/p/models/half-written"))
                os.write(write, b"x")
                time.sleep(60)
        finally:
            os._exit(1)
    assert os.read(read, 1) == b"x"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with store.transaction():  # the lock went with the dead session; its write rolled back
        assert store.get_model("projects/p/models/half-written") is None
        store.put_model(Model(name="projects/p/models/next"))
    assert [m.name for m in store.list_models("projects/p")] == ["projects/p/models/next"]


def test_unreachable_server_is_a_clear_error() -> None:
    url = f"postgresql://mlemu:s3cret@127.0.0.1:{free_port()}/state"
    with pytest.raises(Unavailable) as info:
        PostgresStore(url)
    message = info.value.message
    assert "Cannot connect to the database postgresql://mlemu@127.0.0.1:" in message
    assert "/state (MLEMU_DATABASE_URL)" in message and "s3cret" not in message
    with pytest.raises(ValueError, match="Unsupported MLEMU_DATABASE_URL scheme 'mysql'"):
        open_store("mysql://x/y", Path("."))


def test_an_orphan_is_adopted_by_exactly_one_runner(db_url: str) -> None:
    adopt_orphan_race(lambda: PostgresStore(db_url))


def test_requests_answer_503_while_the_database_is_unreachable(make_app: Any, db_url: str) -> None:
    client = make_app(database_url=db_url)
    assert client.post("/v1/projects/p/models", json={"name": "m"}).status_code == 200
    dbname = db_url.rsplit("/", 1)[-1]
    with psycopg.connect(db_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {dbname} ALLOW_CONNECTIONS false".encode())
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                      (dbname,))
        try:
            response = client.get("/v1/projects/p/models/m")
            assert response.status_code == 503
            error = response.get_json()["error"]
            assert error["status"] == "UNAVAILABLE"
            assert error["message"].startswith(f"Cannot connect to the database {db_url}")
            again = client.get("/v1/projects/p/models/m")  # still down: the same answer
            assert again.status_code == 503
            assert again.get_json()["error"]["message"].startswith("Cannot connect to the database")
        finally:
            admin.execute(f"ALTER DATABASE {dbname} ALLOW_CONNECTIONS true".encode())
    assert client.get("/v1/projects/p/models/m").status_code == 200  # back without a restart
    del client
    gc.collect()  # the emulator's task threads stop with it, not after the server is gone
