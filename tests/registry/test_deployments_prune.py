"""Each process frees the predictors of versions that another process or instance deleted or
re-created (they stop serving at once because every request reads the store; pruning also
releases their memory)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.kit import modelkit

M = "/v1/projects/p/models"
ROWS = {"instances": [[0.5, -1.0, 2.0, 0.1]]}


def _wait(client: Any, op: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while not op.get("done"):
        assert time.monotonic() < deadline, op
        time.sleep(0.05)
        op = client.get(f"/v1/{op['name']}").json
    return op


def test_versions_deleted_elsewhere_are_unloaded_here(make_app: Any, tmp_path: Path) -> None:
    modelkit.sklearn_model(tmp_path / "a", kind="logreg")
    modelkit.sklearn_model(tmp_path / "b", kind="forest")
    here, there = make_app(), make_app()  # two processes' emulators over one store
    here.post(M, json={"name": "m"})
    for v, d in (("v1", "a"), ("v2", "b")):
        _wait(here, here.post(f"{M}/m/versions", json={"name": v, "deploymentUri": str(tmp_path / d)}).json)
    assert here.post(f"{M}/m/versions/v2:predict", json=ROWS).status_code == 200
    assert sorted(here.emu.deployments.loaded()) == ["projects/p/models/m/versions/v1",
                                                     "projects/p/models/m/versions/v2"]
    assert "error" not in _wait(there, there.delete(f"{M}/m/versions/v2").json)
    assert here.post(f"{M}/m/versions/v2:predict", json=ROWS).status_code == 404  # at once
    here.emu.tasks.tick()
    assert list(here.emu.deployments.loaded()) == ["projects/p/models/m/versions/v1"]


def test_a_prune_reads_the_store_only_after_a_change(make_app: Any, tmp_path: Path,
                                                     monkeypatch: Any) -> None:
    modelkit.sklearn_model(tmp_path / "a", kind="logreg")
    here, there = make_app(), make_app()
    # Every write goes through `there`: `here` runs no task, so no background tick of its own
    # prunes meanwhile; the prunes below are the test's.
    there.post(M, json={"name": "m"})
    created = there.post(f"{M}/m/versions", json={"name": "v1", "deploymentUri": str(tmp_path / "a")})
    _wait(there, created.json)
    assert here.post(f"{M}/m/versions/v1:predict", json=ROWS).status_code == 200
    reads: list[str] = []
    get_version = here.emu.store.get_version
    monkeypatch.setattr(here.emu.store, "get_version", lambda name: reads.append(name) or get_version(name))
    here.emu.prune_deployments()
    assert reads == ["projects/p/models/m/versions/v1"]  # the first prune reads what is held
    here.emu.prune_deployments()
    here.emu.prune_deployments()
    assert len(reads) == 1  # nothing changed since: no reads
    there.post(M, json={"name": "other"})  # any change elsewhere: the next prune reads again
    here.emu.prune_deployments()
    assert len(reads) == 2
    assert "error" not in _wait(there, there.delete(f"{M}/m/versions/v1").json)
    here.emu.prune_deployments()
    assert list(here.emu.deployments.loaded()) == []
