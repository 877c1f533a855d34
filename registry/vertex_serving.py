"""A Vertex AI deployed model as the deployments cache sees it, and an endpoint's routing table.

The deployments cache (registry/deployments.py) loads, batches, instruments and unloads
predictors keyed by a version name and incarnation uid. A deployed model becomes such a Version
(name `{endpoint}/deployedModels/{id}`, the deployment's own uid, READY), so Vertex serving shares
every one of those mechanisms with ml v1. `routes` reads an endpoint once per store change
(cached per thread on the store's change token, as registry/lookup.py does), so a predict call
costs no store query while nothing changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core.errors import FailedPrecondition
from registry import vertex_resources as vr
from registry.resources import Version
from registry.store_base import Store
from registry.vertex_traffic import Router


def serving_version(endpoint: str, dm: dict[str, Any]) -> Version:
    serving: dict[str, Any] = {}
    if "_container" in dm:  # a custom container's command (predictors/container.py)
        serving["container"] = {**dm["_container"], "endpointId": endpoint.rsplit("/", 1)[-1],
                                "deployedModelId": dm["id"], "project": endpoint.split("/")[1]}
    return Version(
        name=vr.serving_key(endpoint, dm["id"]), deployment_uri=dm.get("_artifactUri", ""),
        framework=dm.get("_framework", ""), prediction_class=dm.get("_predictionClass", ""),
        package_uris=list(dm.get("_packageUris", [])), state="READY", uid=dm["_uid"],
        serving=serving)


@dataclasses.dataclass(frozen=True)
class Target:
    """One deployed model a request may go to: its serving version and its identity."""

    version: Version
    deployed_model_id: str
    model: str
    model_version_id: str
    model_display_name: str
    explanation_spec: dict[str, Any] | None
    explanations_disabled: bool = False


@dataclasses.dataclass
class Routes:
    endpoint: str
    targets: dict[str, Target]
    split: tuple[tuple[str, int], ...]

    def pick(self, routers: Routers, deployed_model_id: str | None = None) -> Target:
        """The target a request goes to: the one named, else one chosen by the split."""
        if deployed_model_id is not None:
            target = self.targets.get(deployed_model_id)
            if target is None:
                raise FailedPrecondition(
                    f"Deployed model {deployed_model_id} does not exist in endpoint "
                    f"{self.endpoint}.")
            return target
        chosen = routers.get(self.endpoint, self.split).choose()
        if chosen is None or chosen not in self.targets:
            raise FailedPrecondition(
                f"Endpoint `{self.endpoint}` has no deployed model receiving traffic: deploy a "
                "model, or give one a share of the traffic split.")
        return self.targets[chosen]


class Routers:
    """One Router per endpoint and split in a process (not per thread: every thread of a
    worker draws from the same seeded sequence), dropped wholesale past `limit` entries."""

    def __init__(self, limit: int = 1024) -> None:
        self._routers: dict[tuple[str, tuple[tuple[str, int], ...]], Router] = {}
        self._limit = limit

    def get(self, endpoint: str, split: tuple[tuple[str, int], ...]) -> Router:
        key = (endpoint, split)
        router = self._routers.get(key)
        if router is None:
            if len(self._routers) >= self._limit:
                self._routers.clear()
            router = self._routers.setdefault(key, Router(endpoint, dict(split)))
        return router


def build_routes(doc: dict[str, Any]) -> Routes:
    endpoint = doc["name"]
    targets = {
        dm["id"]: Target(serving_version(endpoint, dm), dm["id"], dm["model"],
                         dm.get("modelVersionId", "1"), dm.get("_modelDisplayName", ""),
                         dm.get("explanationSpec") or dm.get("_explanationSpec"),
                         bool(dm.get("disableExplanations")))
        for dm in doc.get("deployedModels", [])
    }
    split = tuple(sorted((str(k), int(v)) for k, v in (doc.get("trafficSplit") or {}).items()))
    return Routes(endpoint, targets, split)


def routes(store: Store, endpoint: str) -> Routes | None:
    """The endpoint's routes (None: no such endpoint); cached on the store (Store.memo)
    while its change token stays the same."""
    memo: dict[str, Routes | None] | None = store.memo("vertex_routes")
    if memo is None or endpoint not in memo:
        doc = store.get(vr.ENDPOINTS, endpoint)
        found = None if doc is None else build_routes(doc)
        if memo is None:
            return found
        memo[endpoint] = found
    return memo[endpoint]


def parse_serving_key(key: str) -> tuple[str, str] | None:
    """(endpoint, deployed model id) for a Vertex deployment's cache key, else None."""
    return vr.parse_serving_key(key)


def deployed_uid(store: Store, key: str) -> str | None:
    """The uid of the deployment a cache key names (None: undeployed or the endpoint is gone);
    what pruning the deployments cache asks about Vertex keys."""
    parsed = vr.parse_serving_key(key)
    if parsed is None:
        return None
    doc = store.get(vr.ENDPOINTS, parsed[0])
    dm = None if doc is None else vr.deployed_model(doc, parsed[1])
    return None if dm is None else str(dm["_uid"])
