"""The traffic-split decisions of deployModel / undeployModel / endpoint patches, and the seeded
router, tested directly (registry/vertex_traffic.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from core.errors import FailedPrecondition, InvalidArgument
from registry.vertex_traffic import Router, after_deploy, after_undeploy, replace


def test_first_model_takes_all_traffic_later_ones_none_unless_asked() -> None:
    assert after_deploy({}, None, "a", []) == {"a": 100}
    assert after_deploy({"a": 100}, None, "b", ["a"]) == {"a": 100}
    assert after_deploy({"a": 100}, {"a": 70, "0": 30}, "b", ["a"]) == {"a": 70, "b": 30}


@pytest.mark.parametrize("split", [{"a": 50, "0": 40}, {"a": 101, "0": -1}, {"a": "x", "0": 100},
                                   {"zzz": 50, "0": 50}])
def test_bad_splits_are_invalid_arguments(split: dict[str, int]) -> None:
    with pytest.raises(InvalidArgument):
        after_deploy({"a": 100}, split, "b", ["a"])


def test_undeploying_a_model_with_traffic_needs_the_remaining_split() -> None:
    with pytest.raises(FailedPrecondition, match="traffic"):
        after_undeploy({"a": 60, "b": 40}, None, "a", ["b"])
    with pytest.raises(FailedPrecondition, match="0 traffic"):
        after_undeploy({"a": 60, "b": 40}, {"a": 10, "b": 90}, "a", ["b"])
    assert after_undeploy({"a": 60, "b": 40}, {"b": 100}, "a", ["b"]) == {"b": 100}
    assert after_undeploy({"a": 100, "b": 0}, None, "b", ["a"]) == {"a": 100}
    assert after_undeploy({"a": 100}, None, "a", []) == {}  # the last one may go


def test_patch_split_names_deployed_models_only() -> None:
    assert replace({"a": 50, "b": 50}, ["a", "b"]) == {"a": 50, "b": 50}
    with pytest.raises(InvalidArgument, match="unknown"):
        replace({"a": 50, "c": 50}, ["a", "b"])


def test_router_follows_the_weights_and_its_seed() -> None:
    draws = [Router("e", {"a": 90, "b": 10}).choose() for _ in range(3)]
    assert len(set(draws)) == 1  # same seed, same first draw
    router = Router("e", {"a": 90, "b": 10, "c": 0})
    counts = Counter(router.choose() for _ in range(2000))
    assert set(counts) == {"a", "b"} and 0.85 < counts["a"] / 2000 < 0.95
    assert Router("e", {}).choose() is None
