"""Durable state through Google's ml v1 client: several server instances share one store and see
each other's changes at once, state survives a restart, and a server killed with SIGKILL in the
middle of versions.create comes back consistent (the operation is finished after restart).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
from googleapiclient.errors import HttpError

from registry import tasks
from registry.store import SqliteStore
from tests.conftest import start_server, stop_server
from tests.kit import modelkit
from tests.kit.mlclient import (
    GATE_PREDICTOR,
    ROWS,
    create_version,
    error_of,
    ml_client,
    predict_rows,
    wait_done,
    wait_for_file,
)

pytestmark = pytest.mark.slow
P = "projects/durable"


def test_instances_share_one_store_and_state_survives_restart(tmp_path: Path) -> None:
    linear = modelkit.sklearn_model(tmp_path / "linear", kind="linreg")
    forest = modelkit.sklearn_model(tmp_path / "forest", kind="forest")
    state = tmp_path / "state"
    a = start_server(state, workers=2)
    b = start_server(state, workers=1)
    try:
        ml_a, ml_b = ml_client(a.url), ml_client(b.url)
        ml_a.projects().models().create(parent=P, body={"name": "shared"}).execute()
        for version, folder in (("v1", "linear"), ("v2", "forest")):
            op = create_version(ml_a, f"{P}/models/shared", version, tmp_path / folder)
            assert wait_done(ml_a, op)["response"]
        # Created through instance A, served at once by instance B (and both of A's workers).
        expect_v2 = forest.predict(np.asarray(ROWS)).tolist()
        for _ in range(4):
            assert predict_rows(ml_b, f"{P}/models/shared/versions/v2") == expect_v2
            assert predict_rows(ml_a, f"{P}/models/shared/versions/v2") == expect_v2
        # Deleted through B: A stops serving it at once although its workers had it loaded.
        assert "error" not in wait_done(ml_b, ml_b.projects().models().versions().delete(
            name=f"{P}/models/shared/versions/v2").execute())
        for _ in range(4):
            with pytest.raises(HttpError) as info:
                predict_rows(ml_a, f"{P}/models/shared/versions/v2")
            assert info.value.resp.status == 404
    finally:
        stop_server(a.proc)
        stop_server(b.proc)

    c = start_server(state, workers=1)
    try:
        ml_c = ml_client(c.url)
        model = ml_c.projects().models().get(name=f"{P}/models/shared").execute()
        assert model["defaultVersion"]["name"] == f"{P}/models/shared/versions/v1"
        listed = ml_c.projects().models().versions().list(parent=f"{P}/models/shared").execute()
        assert [v["name"].rsplit("/", 1)[-1] for v in listed["versions"]] == ["v1"]
        assert predict_rows(ml_c, f"{P}/models/shared") == pytest.approx(
            linear.predict(np.asarray(ROWS)).tolist())
        ops = ml_c.projects().operations().list(name=P).execute()["operations"]
        assert sorted(o["metadata"]["operationType"] for o in ops) == [
            "CREATE_VERSION", "CREATE_VERSION", "DELETE_VERSION"]
        assert all(o["done"] for o in ops)
    finally:
        stop_server(c.proc)


def test_sigkill_during_versions_create_comes_back_consistent(tmp_path: Path) -> None:
    package = modelkit.custom_package(tmp_path / "pkg", module="gate_predictor",
                                      source=GATE_PREDICTOR, kind="dir")
    model_dir = tmp_path / "gated"
    model_dir.mkdir()
    state = tmp_path / "state"
    a = start_server(state, workers=1)
    try:
        ml = ml_client(a.url)
        ml.projects().models().create(parent=P, body={"name": "slow"}).execute()
        op = create_version(ml, f"{P}/models/slow", "v1", model_dir,
                            predictionClass="gate_predictor.GatePredictor",
                            packageUris=[str(package)])
        wait_for_file(model_dir / "started")  # the worker is inside from_path now
        version = ml.projects().models().versions().get(name=f"{P}/models/slow/versions/v1").execute()
        assert version["state"] == "CREATING"
        # Nothing may change a version while its operation runs.
        for call in (ml.projects().models().versions().delete(name=version["name"]),
                     ml.projects().models().versions().patch(
                         name=version["name"], updateMask="description", body={"description": "x"}),
                     ml.projects().models().delete(name=f"{P}/models/slow")):
            with pytest.raises(HttpError) as info:
                call.execute()
            assert info.value.resp.status == 400
            assert "has an operation in progress" in error_of(info.value)["message"]
    finally:
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait(timeout=30)

    # What the dead server left: the version, its operation and its task, all in step.
    store = SqliteStore(state / "mlemu.sqlite3")
    assert store.get_version(f"{P}/models/slow/versions/v1").state == "CREATING"  # type: ignore[union-attr]
    assert store.get_operation(op["name"]).done is False  # type: ignore[union-attr]
    assert [t.name for t in tasks.pending(store)] == [op["name"]]

    (model_dir / "started").unlink()
    (model_dir / "release").touch()
    b = start_server(state, workers=2)
    try:
        ml = ml_client(b.url)
        done = wait_done(ml, ml.projects().operations().get(name=op["name"]).execute())
        assert done["response"]["state"] == "READY", done
        assert done["metadata"]["endTime"]
        version = ml.projects().models().versions().get(name=f"{P}/models/slow/versions/v1").execute()
        assert version["state"] == "READY" and version["isDefault"] is True
        assert predict_rows(ml, f"{P}/models/slow") == [sum(r) for r in ROWS]
        assert tasks.pending(store) == []
        assert "adopting operation" in b.output()
    finally:
        stop_server(b.proc)
