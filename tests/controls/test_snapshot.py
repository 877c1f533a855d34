"""Snapshots: export, import into a fresh server (exact round trip, model files included), and
damaged or hostile archives refused whole without a change."""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from admin.snapshot import MANIFEST
from tests.kit import modelkit

ROWS = [[0.5, -1.0, 2.0, 0.1]]


def ok(answer: Any) -> Any:
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_json()


def wait_done(client: Any, op: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while not op.get("done"):
        assert time.monotonic() < deadline, op
        time.sleep(0.05)
        op = ok(client.get(f"/v1/{op['name']}"))
    return op


def manifest(archive: bytes) -> dict[str, Any]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        handle = tar.extractfile(MANIFEST)
        assert handle is not None
        return dict(json.loads(handle.read()))


@pytest.fixture
def source(tmp_path: Path, make_app: Callable[..., Any]) -> Any:
    client = make_app(state_dir=tmp_path / "one")
    inside = tmp_path / "one" / "models" / "inside"
    modelkit.sklearn_model(inside)
    outside = tmp_path / "outside"
    modelkit.sklearn_model(outside, kind="linreg")
    ok(client.post("/v1/projects/p/models", json={"name": "m", "labels": {"team": "a"}}))
    wait_done(client, ok(client.post("/v1/projects/p/models/m/versions",
                                     json={"name": "v1", "deploymentUri": str(inside)})))
    wait_done(client, ok(client.post("/v1/projects/p/models/m/versions",
                                     json={"name": "v2", "deploymentUri": str(outside)})))
    client.outside = outside
    return client


def test_a_snapshot_round_trips_exactly_into_a_fresh_server(
        source: Any, tmp_path: Path, make_app: Callable[..., Any]) -> None:
    archive = source.get("/_mlemu/snapshot")
    assert archive.status_code == 200 and archive.mimetype == "application/gzip"
    data = archive.get_data()
    expected = {v: ok(source.post(f"/v1/projects/p/models/m/versions/{v}:predict",
                                  json={"instances": ROWS})) for v in ("v1", "v2")}
    (tmp_path / "one").rename(tmp_path / "old")  # a fresh server in the same place
    fresh = make_app(state_dir=tmp_path / "one")
    assert ok(fresh.post("/_mlemu/snapshot", data=data,
                         headers={"Content-Type": "application/gzip"})) == {}
    assert manifest(fresh.get("/_mlemu/snapshot").get_data())["store"] == manifest(data)["store"]
    copied = tmp_path / "one" / "models" / "inside" / "model.joblib"
    assert copied.read_bytes() == (tmp_path / "old" / "models" / "inside" /
                                   "model.joblib").read_bytes()
    for version, answer in expected.items():
        assert ok(fresh.post(f"/v1/projects/p/models/m/versions/{version}:predict",
                             json={"instances": ROWS})) == answer


def test_a_snapshot_moves_into_another_state_directory(
        source: Any, tmp_path: Path, make_app: Callable[..., Any]) -> None:
    data = source.get("/_mlemu/snapshot").get_data()
    fresh = make_app(state_dir=tmp_path / "two")
    ok(fresh.post("/_mlemu/snapshot", data=data))
    version = ok(fresh.get("/v1/projects/p/models/m/versions/v1"))
    assert version["deploymentUri"] == str((tmp_path / "two" / "models" / "inside").resolve())
    assert ok(fresh.post("/v1/projects/p/models/m/versions/v1:predict",
                         json={"instances": ROWS}))["predictions"]


def test_files_from_outside_the_state_directory_are_restored_inside_it_when_gone(
        source: Any, tmp_path: Path, make_app: Callable[..., Any]) -> None:
    data = source.get("/_mlemu/snapshot").get_data()
    for path in source.outside.iterdir():
        path.unlink()
    source.outside.rmdir()
    fresh = make_app(state_dir=tmp_path / "two")
    ok(fresh.post("/_mlemu/snapshot", data=data))
    uri = ok(fresh.get("/v1/projects/p/models/m/versions/v2"))["deploymentUri"]
    assert uri.startswith(str((tmp_path / "two" / "imported").resolve()))
    assert ok(fresh.post("/v1/projects/p/models/m/versions/v2:predict",
                         json={"instances": ROWS}))["predictions"]


def _archive(members: list[tuple[tarfile.TarInfo, bytes]], with_manifest: bool = True) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        if with_manifest:
            body = json.dumps({"format": "mlemu-snapshot", "version": 1, "store": {},
                               "files": {}}).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        for info, body in members:
            info.size = len(body) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(body) if info.isfile() else None)
    return out.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _hostile() -> list[tuple[bytes, str]]:
    return [
        (b"not an archive at all", "not a readable gzip tar archive"),
        (_archive([(_member("files/state/models/x/../../../../evil"), b"x")]), "relative path"),
        (_archive([(_member("/etc/evil"), b"x")]), "relative path"),
        (_archive([(_member("files/state/models/l", tarfile.SYMTYPE, "/etc/passwd"), b"")]),
         "link or special file"),
        (_archive([(_member("files/state/models/h", tarfile.LNKTYPE, MANIFEST), b"")]),
         "link or special file"),
        (_archive([(_member("files/state/models/d", tarfile.CHRTYPE), b"")]),
         "link or special file"),
        (_archive([(_member("elsewhere/file"), b"x")]), "not part of an mlemu snapshot"),
        (_archive([], with_manifest=False), "no readable"),
    ]


@pytest.mark.parametrize("case", range(len(_hostile())))
def test_a_damaged_archive_is_refused_whole_and_changes_nothing(
        source: Any, tmp_path: Path, case: int) -> None:
    data, words = _hostile()[case]
    before = manifest(source.get("/_mlemu/snapshot").get_data())
    answer = source.post("/_mlemu/snapshot", data=data)
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and words in error["message"]
    assert "nothing was changed" in error["message"]
    assert manifest(source.get("/_mlemu/snapshot").get_data()) == before
    assert not (tmp_path / "evil").exists()
    assert not list((tmp_path / "one").glob(".import-*"))


def test_a_manifest_of_another_format_or_version_is_refused(source: Any) -> None:
    for body, words in (({"format": "other"}, "not an mlemu snapshot manifest"),
                        ({"format": "mlemu-snapshot", "version": 9}, "snapshot version 9"),
                        ({"format": "mlemu-snapshot", "version": 1, "store": {"secrets": []},
                          "files": {}}, "no valid store")):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w:gz") as tar:
            raw = json.dumps(body).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
        answer = source.post("/_mlemu/snapshot", data=out.getvalue())
        assert answer.status_code == 400 and words in answer.get_json()["error"]["message"]
    assert ok(source.get("/v1/projects/p/models/m"))["labels"] == {"team": "a"}


def test_a_postgresql_store_round_trips_and_resets_too(
        source: Any, tmp_path: Path, make_app: Callable[..., Any], postgres: Any) -> None:
    """The same archive into a server on PostgreSQL: restored exactly; a reset there empties it."""
    data = source.get("/_mlemu/snapshot").get_data()
    on_postgres = make_app(state_dir=tmp_path / "pg", database_url=postgres.new_database())
    assert ok(on_postgres.post("/_mlemu/snapshot", data=data)) == {}
    exported = manifest(on_postgres.get("/_mlemu/snapshot").get_data())
    rewritten = manifest(data)["store"]
    # Only the versions' URIs move to this state directory (operations keep their history).
    rewritten["versions"] = json.loads(json.dumps(rewritten["versions"]).replace(
        str((tmp_path / "one").resolve()), str((tmp_path / "pg").resolve())))
    for kind in rewritten:
        assert exported["store"][kind] == rewritten[kind], kind
    assert ok(on_postgres.post("/v1/projects/p/models/m/versions/v1:predict",
                               json={"instances": ROWS}))["predictions"]
    assert ok(on_postgres.post("/_mlemu/reset", json={})) == {}
    assert ok(on_postgres.get("/v1/projects/p/models")) == {}
