"""The serving-version lookup is cached per thread, yet sees every change at once: its own
process's writes (any thread, same connection or not), other processes' commits, rollbacks."""

import subprocess
import sys
import threading

import pytest

from core.errors import FailedPrecondition, NotFound
from core.payloads import ModelRef
from registry import lookup
from registry.resources import Model, Version
from registry.store import SqliteStore
from tests.conftest import ROOT

REF = ModelRef("p", "m")
NAME = "projects/p/models/m/versions/v1"


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite3")
    store.put_model(Model(name="projects/p/models/m", default_version="v1"))
    store.put_version(Version(name=NAME, deployment_uri="/x", state="READY"))
    return store


def test_unchanged_store_answers_from_the_cache(store):
    first = lookup.serving_version(store, REF)
    assert lookup.serving_version(store, REF) is first
    assert lookup.serving_version(store, ModelRef("p", "m", "v1")).name == NAME


def test_same_thread_write_is_seen(store):
    lookup.serving_version(store, REF)
    version = store.get_version(NAME)
    version.state = "FAILED"
    store.put_version(version)
    with pytest.raises(FailedPrecondition):
        lookup.serving_version(store, REF)


def test_other_thread_delete_is_seen(store):
    lookup.serving_version(store, REF)
    thread = threading.Thread(target=store.delete, args=("versions", NAME))
    thread.start()
    thread.join()
    with pytest.raises(NotFound):
        lookup.serving_version(store, REF)


def test_other_process_delete_is_seen(store):
    lookup.serving_version(store, REF)
    code = (f"from registry.store import SqliteStore\n"
            f"SqliteStore({str(store.path)!r}).delete('models', 'projects/p/models/m')\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    with pytest.raises(NotFound):
        lookup.serving_version(store, REF)


def test_rolled_back_write_is_forgotten(store):
    with pytest.raises(RuntimeError), store.transaction():
        version = store.get_version(NAME)
        version.state = "FAILED"
        store.put_version(version)
        with pytest.raises(FailedPrecondition):  # inside: this connection sees its own write
            lookup.serving_version(store, REF)
        raise RuntimeError("abort")
    assert lookup.serving_version(store, REF).state == "READY"


def test_errors_are_not_cached(store):
    with pytest.raises(NotFound):
        lookup.serving_version(store, ModelRef("p", "nope"))
    store.put_model(Model(name="projects/p/models/nope", default_version="v1"))
    store.put_version(Version(name="projects/p/models/nope/versions/v1", state="READY"))
    assert lookup.serving_version(store, ModelRef("p", "nope")).state == "READY"


def test_other_process_transaction_is_seen(store):
    lookup.serving_version(store, REF)
    code = (f"from registry.store import SqliteStore\n"
            f"s = SqliteStore({str(store.path)!r})\n"
            f"with s.transaction():\n"
            f"    v = s.get_version({NAME!r}); v.state = 'FAILED'; s.put_version(v)\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    with pytest.raises(FailedPrecondition):
        lookup.serving_version(store, REF)


def test_without_a_signal_file_changes_are_still_seen(tmp_path):
    # The signal file cannot be made (a directory holds its name): the store asks SQLite instead.
    (tmp_path / "db.sqlite3-changes").mkdir()
    store = SqliteStore(tmp_path / "db.sqlite3")
    store.put_model(Model(name="projects/p/models/m", default_version="v1"))
    store.put_version(Version(name=NAME, deployment_uri="/x", state="READY"))
    first = lookup.serving_version(store, REF)
    assert lookup.serving_version(store, REF) is first
    code = (f"from registry.store import SqliteStore\n"
            f"SqliteStore({str(store.path)!r}).delete('models', 'projects/p/models/m')\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    with pytest.raises(NotFound):
        lookup.serving_version(store, REF)
