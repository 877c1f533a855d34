"""models.list over 1,000 models (the SQLite store, in process): paging at the default and the
largest page size walks every model once in name order with its default version embedded, and
filters (on the embedded default version too) page the same way. No timing: bench/many.py
measures how fast."""

from __future__ import annotations

from typing import Any

from controlplane import listing
from registry.resources import Model, Version

M = "/v1/projects/p/models"
COUNT = 1000


def _seed(store: Any) -> None:
    with store.transaction():
        for i in range(COUNT):
            name = f"projects/p/models/m{i:04d}"
            default = "v1" if i % 3 else ""
            store.put_model(Model(name=name, default_version=default, etag=f"e{i}",
                                  labels={"team": "red" if i % 2 else "blue"}))
            if default:
                store.put_version(Version(name=f"{name}/versions/v1", deployment_uri=f"/m/{i}",
                                          state="READY", uid=f"u{i}", etag=f"ve{i}"))


def _walk(client: Any, query: str) -> tuple[list[dict[str, Any]], list[int]]:
    models: list[dict[str, Any]] = []
    sizes, token = [], ""
    while True:
        r = client.get(f"{M}?{query}" + (f"&pageToken={token}" if token else ""))
        assert r.status_code == 200, r.json
        page = r.json.get("models", [])
        models += page
        sizes.append(len(page))
        token = r.json.get("nextPageToken", "")
        if not token:
            return models, sizes


def test_paging_through_a_thousand_models(make_app: Any) -> None:
    client = make_app()
    _seed(client.emu.store)
    for query, size in (("", listing.DEFAULT_PAGE_SIZE), ("pageSize=100", 100),
                        ("pageSize=5000", listing.MAX_PAGE_SIZE)):
        models, sizes = _walk(client, query)
        assert [m["name"] for m in models] == [f"projects/p/models/m{i:04d}" for i in range(COUNT)]
        assert sizes == [size] * (COUNT // size)
    for i, model in enumerate(models):
        if i % 3:
            assert model["defaultVersion"] == {
                "name": f"projects/p/models/m{i:04d}/versions/v1", "deploymentUri": f"/m/{i}",
                "state": "READY", "isDefault": True, "etag": f"ve{i}"}
        else:
            assert "defaultVersion" not in model
        assert model["labels"] == {"team": "red" if i % 2 else "blue"}


def test_filters_over_a_thousand_models_page_the_same_way(make_app: Any) -> None:
    client = make_app()
    _seed(client.emu.store)
    red, _ = _walk(client, "pageSize=30&filter=labels.team%3Dred")
    assert [m["name"] for m in red] == [f"projects/p/models/m{i:04d}" for i in range(1, COUNT, 2)]
    assert all("defaultVersion" in m for m in red if int(m["name"][-4:]) % 3)
    ready, sizes = _walk(client, "pageSize=50&filter=defaultVersion.state%3DREADY")
    assert [m["name"] for m in ready] == [f"projects/p/models/m{i:04d}" for i in range(COUNT)
                                          if i % 3]
    assert max(sizes) == 50
