"""The serving-version lookup is cached on the store (shared by the process's threads where
their change tokens agree), yet sees every change at once: its own process's writes (any thread,
same connection or not), other processes' commits, rollbacks. Quiet bookkeeping writes
(lastUseTime) keep the cache."""

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


def test_a_version_read_by_one_thread_serves_every_thread(store):
    # With a thousand versions and 32 threads a worker, a per-thread cache made every thread
    # read every version itself: most requests of a spread missed.
    assert store.tokens_shared()
    first = lookup.serving_version(store, REF)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(lookup.serving_version(store, REF)))
    thread.start()
    thread.join()
    assert seen == [first] and seen[0] is first


def test_without_a_signal_file_the_cache_is_per_thread(tmp_path):
    # PRAGMA data_version is per connection: one thread's token would evict another's entries.
    (tmp_path / "db.sqlite3-changes").mkdir()
    store = SqliteStore(tmp_path / "db.sqlite3")
    assert not store.tokens_shared()
    mine = store.scratch()
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(store.scratch()))
    thread.start()
    thread.join()
    assert store.scratch() is mine and theirs[0] is not mine


def _stamp(current):
    current.last_use_time = "2026-11-28T00:00:00Z"
    return True


def test_a_quiet_write_keeps_the_token_and_the_cache_but_is_stored(store):
    first = lookup.serving_version(store, REF)
    token = store.change_token()
    store.update_version(first, _stamp, quiet=True)
    assert store.change_token() == token
    assert lookup.serving_version(store, REF) is first
    assert store.get_version(NAME).last_use_time == "2026-11-28T00:00:00Z"  # written all the same
    store.update_version(first, _stamp)  # the same write, not quiet
    assert store.change_token() != token
    assert lookup.serving_version(store, REF) is not first


def test_a_loud_write_inside_a_quiet_transaction_changes_the_token(store):
    first = lookup.serving_version(store, REF)
    token = store.change_token()
    with store.transaction(quiet=True):
        version = store.get_version(NAME)
        version.state = "FAILED"
        with store.transaction():
            store.put_version(version)
    assert store.change_token() != token
    with pytest.raises(FailedPrecondition):
        lookup.serving_version(store, REF)
    assert first.state == "READY"


def test_a_quiet_write_in_another_process_keeps_the_token(store):
    token = store.change_token()
    code = (f"from registry.store import SqliteStore\n"
            f"s = SqliteStore({str(store.path)!r})\n"
            f"def stamp(v):\n    v.last_use_time = 'x'\n    return True\n"
            f"s.update_version(s.get_version({NAME!r}), stamp, quiet=True)\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    assert store.change_token() == token
    assert store.get_version(NAME).last_use_time == "x"
