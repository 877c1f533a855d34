"""A store that cannot be used (issue 17, item 7): routes that need it answer 503 UNAVAILABLE
naming the file and the fix, readiness says so, a failed bookkeeping write never costs a computed
prediction, and `serve` refuses to start with one clear line instead of a traceback."""

import subprocess
import sys
import threading

from core.errors import Unavailable
from tests.conftest import ROOT
from tests.kit import modelkit

GARBAGE = b"this is not an SQLite database. " * 256


def in_new_thread(call):
    """`call()` from a thread of its own: the store opens a new connection there (as a new worker
    process or thread would), which is where a damaged file shows."""
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", call()))
    thread.start()
    thread.join(60)
    return result["value"]


def test_a_damaged_store_is_503_unavailable_and_not_ready(make_app):
    client = make_app()
    assert client.post("/v1/projects/p/models", json={"name": "m"}).status_code == 200
    store = client.emu.store
    store.close()
    with open(store.path, "r+b") as db:  # the file's header and first pages overwritten
        db.write(GARBAGE)
    for suffix in ("-wal", "-shm"):
        store.path.with_name(store.path.name + suffix).unlink(missing_ok=True)
    for path in ("/v1/projects/p/models", "/v1/projects/p/models/m", "/v1/projects/p/operations"):
        answer = in_new_thread(lambda path=path: client.get(path))
        assert answer.status_code == 503, (path, answer.data)
        error = answer.get_json()["error"]
        assert error["status"] == "UNAVAILABLE"
        assert str(store.path) in error["message"] and "restore it from a backup" in error["message"]
    ready = in_new_thread(lambda: client.get("/readyz"))
    assert ready.status_code == 503 and ready.get_json()["status"] == "unavailable"
    assert in_new_thread(lambda: client.get("/v2/health/ready")).status_code != 200
    assert in_new_thread(lambda: client.get("/healthz")).status_code == 200  # alive, not ready


def test_a_failed_last_use_write_does_not_fail_the_prediction(make_app, tmp_path, monkeypatch):
    modelkit.sklearn_model(tmp_path / "iris")
    config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"m": {"versions": {
        "v1": {"deploymentUri": str(tmp_path / "iris")}}}})
    client = make_app(config)

    def unwritable(version, change):
        raise Unavailable("The state store is read-only.")

    monkeypatch.setattr(client.emu.store, "update_version", unwritable)
    for _ in range(3):
        answer = client.post("/v1/projects/p/models/m:predict",
                             json={"instances": [[1.0, 2.0, 0.5, -1.0]]})
        assert answer.status_code == 200, answer.data
        assert len(answer.get_json()["predictions"]) == 1


def test_serve_refuses_a_damaged_store_in_one_line(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "mlemu.sqlite3").write_bytes(GARBAGE)
    result = subprocess.run([sys.executable, str(ROOT / "app.py"), "serve", "--state-dir", str(state),
                             "--port", "0", "--grpc-port", "0"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert str(state / "mlemu.sqlite3") in lines[0] and "file is not a database" in lines[0]
