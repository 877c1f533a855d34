"""Several instances, one state, through Google's ml v1 client: two servers with separate state
directories share one PostgreSQL database (a real server started by the tests). A version
created through one serves through the other, a deletion through the other stops it serving
everywhere, and when the instance running a versions.create is killed (SIGKILL) the other adopts
the operation, finishes it once, and reports its outcome.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from googleapiclient.errors import HttpError

from registry import tasks
from registry.store_postgres import PostgresStore
from tests.conftest import ROOT, free_port, start_server, stop_server
from tests.kit import modelkit
from tests.kit.mlclient import (
    GATE_PREDICTOR,
    ROWS,
    create_version,
    ml_client,
    predict_rows,
    wait_done,
    wait_for_file,
)

pytestmark = pytest.mark.slow
P = "projects/shared"


def test_two_instances_share_one_database(postgres: Any, tmp_path: Path) -> None:
    forest = modelkit.sklearn_model(tmp_path / "forest", kind="forest")
    env = {"MLEMU_DATABASE_URL": postgres.new_database()}
    a = start_server(tmp_path / "a", workers=2, env=env)
    b = start_server(tmp_path / "b", workers=1, env=env)
    try:
        ml_a, ml_b = ml_client(a.url), ml_client(b.url)
        ml_a.projects().models().create(parent=P, body={"name": "m"}).execute()
        op = create_version(ml_a, f"{P}/models/m", "v1", tmp_path / "forest")
        done = wait_done(ml_b, ml_b.projects().operations().get(name=op["name"]).execute())
        assert done["response"]["state"] == "READY"
        expect = forest.predict(np.asarray(ROWS)).tolist()
        for _ in range(4):  # created through A; B (and both of A's workers) serve it
            assert predict_rows(ml_b, f"{P}/models/m/versions/v1") == expect
            assert predict_rows(ml_a, f"{P}/models/m") == expect
        assert "error" not in wait_done(ml_b, ml_b.projects().models().versions().delete(
            name=f"{P}/models/m/versions/v1").execute())
        for ml in (ml_a, ml_a, ml_b):  # A's workers had it loaded: it stops serving there too
            with pytest.raises(HttpError) as info:
                predict_rows(ml, f"{P}/models/m/versions/v1")
            assert info.value.resp.status == 404
        # Nothing of it is in either state directory: the database holds the state.
        assert not (tmp_path / "a" / "mlemu.sqlite3").exists()
        assert not (tmp_path / "b" / "mlemu.sqlite3").exists()
    finally:
        stop_server(a.proc)
        stop_server(b.proc)


def test_sigkill_during_versions_create_is_finished_by_the_other_instance(
        postgres: Any, tmp_path: Path) -> None:
    package = modelkit.custom_package(tmp_path / "pkg", module="gate_predictor",
                                      source=GATE_PREDICTOR, kind="dir")
    model_dir = tmp_path / "gated"
    model_dir.mkdir()
    url = postgres.new_database()
    a = start_server(tmp_path / "a", workers=1, env={"MLEMU_DATABASE_URL": url})
    b = start_server(tmp_path / "b", workers=1, env={"MLEMU_DATABASE_URL": url})
    try:
        ml_a, ml_b = ml_client(a.url), ml_client(b.url)
        ml_a.projects().models().create(parent=P, body={"name": "slow"}).execute()
        op = create_version(ml_a, f"{P}/models/slow", "v1", model_dir,
                            predictionClass="gate_predictor.GatePredictor",
                            packageUris=[str(package)])
        wait_for_file(model_dir / "started")  # A's worker is inside from_path now
        assert ml_b.projects().operations().get(name=op["name"]).execute().get("done") is None
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait(timeout=30)
        (model_dir / "started").unlink()
        (model_dir / "release").touch()

        done = wait_done(ml_b, ml_b.projects().operations().get(name=op["name"]).execute())
        assert done["response"]["state"] == "READY", done
        version = ml_b.projects().models().versions().get(name=f"{P}/models/slow/versions/v1").execute()
        assert version["state"] == "READY" and version["isDefault"] is True
        assert predict_rows(ml_b, f"{P}/models/slow") == [sum(r) for r in ROWS]
        assert b.output().count("adopting operation") == 1  # run again once, by B only
        assert tasks.pending(PostgresStore(url)) == []
    finally:
        stop_server(a.proc)
        stop_server(b.proc)


def test_serve_with_an_unreachable_database_fails_clearly(tmp_path: Path) -> None:
    url = f"postgresql://mlemu:s3cret@127.0.0.1:{free_port()}/mlemu"
    result = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "serve", "--state-dir", str(tmp_path)],
        env={**os.environ, "MLEMU_DATABASE_URL": url, "MLEMU_GRPC_PORT": "0"},
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "Cannot connect to the database postgresql://mlemu@127.0.0.1:" in result.stderr
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr
