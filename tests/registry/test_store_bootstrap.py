"""The SQLite store (durable, transactional, shared) and the declarative bootstrap file."""

import threading

import pytest

from registry import bootstrap
from registry.resources import Model, Version
from registry.store import SqliteStore
from tests.kit import modelkit


def test_store_persists_across_instances_and_rolls_back(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.put_model(Model(name="projects/p/models/a", description="first"))
    with pytest.raises(RuntimeError), store.transaction():
        store.put_model(Model(name="projects/p/models/b"))
        raise RuntimeError("crash mid-write")
    again = SqliteStore(tmp_path / "s.db")
    assert [m.name for m in again.list_models("projects/p")] == ["projects/p/models/a"]
    assert again.get_model("projects/p/models/a").description == "first"
    assert again.get_model("projects/p/models/b") is None
    assert again.delete("models", "projects/p/models/a") and not again.delete("models", "nope")


def test_transactions_serialise_read_check_write(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.put_model(Model(name="projects/p/models/counter", description="0"))

    def bump():
        for _ in range(25):
            with store.transaction():
                model = store.get_model("projects/p/models/counter")
                model.description = str(int(model.description) + 1)
                store.put_model(model)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get_model("projects/p/models/counter").description == "100"


def _config(tmp_path, versions, **model):
    return modelkit.bootstrap_file(tmp_path / "b.yaml", {"m": {"versions": versions, **model}})


def test_bootstrap_is_idempotent_and_sets_the_first_default(tmp_path):
    modelkit.sklearn_model(tmp_path / "a")
    modelkit.xgboost_model(tmp_path / "b")
    config = _config(tmp_path, {"v1": {"deploymentUri": "a"}, "v2": {"deploymentUri": "b"}})
    store = SqliteStore(tmp_path / "s.db")
    declared = bootstrap.apply(store, config)
    assert declared == ["projects/p/models/m/versions/v1", "projects/p/models/m/versions/v2"]
    model = store.get_model("projects/p/models/m")
    assert model.default_version == "v1"
    v1 = store.get_version(declared[0])
    v2 = store.get_version(declared[1])
    assert (v1.state, v1.framework) == ("READY", "")  # joblib: decided when loaded
    assert (v2.state, v2.framework) == ("READY", "XGBOOST")
    bootstrap.apply(store, config)
    assert store.get_version(declared[0]).uid == v1.uid  # unchanged spec keeps the incarnation


def test_bootstrap_applied_again_unchanged_writes_nothing(tmp_path):
    """A second worker (or a restart) applying the same file leaves the store as it was: no
    write renews the change token, the model keeps its etag; a changed description is written."""
    modelkit.sklearn_model(tmp_path / "a")
    config = _config(tmp_path, {"v1": {"deploymentUri": "a"}}, description="one")
    store = SqliteStore(tmp_path / "s.db")
    bootstrap.apply(store, config)
    etag, token = store.get_model("projects/p/models/m").etag, store.change_token()
    other = SqliteStore(tmp_path / "s.db")  # the next worker's connection
    bootstrap.apply(other, config)
    assert store.change_token() == token
    assert store.get_model("projects/p/models/m").etag == etag
    bootstrap.apply(other, _config(tmp_path, {"v1": {"deploymentUri": "a", "description": "d"}},
                                   description="two"))
    assert store.change_token() != token
    model = store.get_model("projects/p/models/m")
    assert (model.description, model.etag != etag) == ("two", True)
    assert store.get_version("projects/p/models/m/versions/v1").description == "d"


def test_bootstrap_replaces_changed_versions_and_marks_failures(tmp_path):
    modelkit.sklearn_model(tmp_path / "a")
    store = SqliteStore(tmp_path / "s.db")
    bootstrap.apply(store, _config(tmp_path, {"v1": {"deploymentUri": "a"}}))
    uid = store.get_version("projects/p/models/m/versions/v1").uid
    bootstrap.apply(store, _config(tmp_path, {"v1": {"deploymentUri": "missing"}},
                                   defaultVersion="v1"))
    version = store.get_version("projects/p/models/m/versions/v1")
    assert version.uid != uid
    assert version.state == "FAILED" and "does not exist" in version.error_message


@pytest.mark.parametrize("body,fragment", [
    ({"m": {"versions": {"1bad": {"deploymentUri": "a"}}}}, "must start with a letter"),
    ({"m": {"versions": {"v1": {}}}}, "deploymentUri is required"),
    ({"m": {"versions": {"v1": {"deploymentUri": "a", "colour": 1}}}}, "unknown key(s) colour"),
    ({"m": {"defaultVersion": "v9", "versions": {"v1": {"deploymentUri": "a"}}}}, "not one of"),
    ({"bad-name": {}}, "must start with a letter"),
    ({"m": {"versions": {"v1": {"deploymentUri": "a", "explanationConfig": {
        "sampledShapleyAttribution": {"numPaths": 99}}}}}}, "numPaths must be an integer from 1 to 50"),
])
def test_bootstrap_errors_name_the_entry(tmp_path, body, fragment):
    config = modelkit.bootstrap_file(tmp_path / "b.yaml", body)
    with pytest.raises(bootstrap.BootstrapError) as err:
        bootstrap.apply(SqliteStore(tmp_path / "s.db"), config)
    assert fragment in str(err.value) and "b.yaml" in str(err.value)


def test_resources_round_trip_json():
    version = Version.from_json({"deploymentUri": "gs://b/m", "framework": "scikit_learn",
                                 "autoScaling": {"minNodes": 1}, "state": "READY"},
                                "projects/p/models/m/versions/v1")
    assert version.framework == "SCIKIT_LEARN" and version.state == "CREATING"
    body = version.to_json(is_default=True)
    assert body["autoScaling"] == {"minNodes": 1} and body["isDefault"] is True
    assert "deployment_uri" not in body and body["deploymentUri"] == "gs://b/m"
