"""What a version loaded and then unloaded still holds counts against MLEMU_MAX_LOADED_MB
(registry/footprint.py RESIDUE): the decision on sizes and counts injected, no timing or PSS."""

from __future__ import annotations

from pathlib import Path

from observability.metrics import Instruments
from registry import footprint
from registry.deployments import Deployments
from tests.registry.test_deployments_cap import Counting, short, version

MB = 1 << 20
KB = 1 << 10


def test_the_residue_of_unloaded_versions_takes_room_from_the_loaded() -> None:
    others = [(1, "a", MB), (2, "b", MB), (3, "c", MB)]
    assert footprint.evictions(others, MB, 0, 4 * MB) == []
    # 256 versions unloaded before hold 1 MiB: 5 MiB against 4. Unloading `a` saves its 1 MiB
    # but it leaves a residue of its own (4 KiB), so `b` goes too.
    assert footprint.evictions(others, MB, 0, 4 * MB, unloaded=256, residue=4 * KB) == ["a", "b"]
    # 255 of them: 4 MiB - 4 KiB + 4 MiB of models; unloading `a` leaves exactly 4 MiB.
    assert footprint.evictions(others, MB, 0, 4 * MB, unloaded=255, residue=4 * KB) == ["a"]


def test_a_residue_over_the_cap_leaves_only_the_version_just_loaded() -> None:
    others = [(1, "a", MB), (2, "b", MB)]
    assert footprint.evictions(others, MB, 0, 4 * MB, unloaded=2000, residue=4 * KB) == ["a", "b"]


def test_the_count_cap_ignores_the_residue() -> None:
    others = [(1, "a", MB), (2, "b", MB)]
    assert footprint.evictions(others, MB, 3, 0, unloaded=10**6, residue=4 * KB) == []


def capped(tmp_path: Path, max_bytes: int, residue: int) -> Deployments:
    return Deployments(tmp_path, loader=Counting(), max_bytes=max_bytes,
                       sizer=lambda _v, _p: MB, residue=residue)


def test_deployments_keep_loaded_models_and_residue_within_the_cap(tmp_path: Path) -> None:
    """Versions of 1 MiB each under a 4 MiB cap, 256 KiB left by each one unloaded: the more
    have been served, the fewer stay loaded, always the most recent ones, and the loaded models
    plus the residue stay within the cap until the residue alone is over it."""
    cap, residue = 4 * MB, 256 * KB
    d = capped(tmp_path, cap, residue)
    names = [f"v{i:02d}" for i in range(20)]
    for served, name in enumerate(names, start=1):
        assert d.get(version(name)).predict([1]) == [2]
        fits = (cap - served * residue) // (MB - residue)  # L MiB + (served - L) x residue <= cap
        expected = max(1, min(served, fits))
        assert short(d) == names[served - expected:served], served
        held = d.loaded_bytes() + (served - expected) * residue
        assert held <= cap or expected == 1
    # Loaded again: a version unloaded before holds no second residue.
    d.get(version("v00"))
    assert short(d) == ["v00"]


def test_warm_up_room_counts_the_residue(tmp_path: Path) -> None:
    d = capped(tmp_path, 4 * MB, 512 * KB)
    d.get(version("a"))
    d.get(version("b"))
    assert d.has_room()  # 2 MiB loaded, nothing unloaded yet
    d.drop(version("a").name)
    d.drop(version("b").name)
    d.get(version("c"))
    d.get(version("d"))  # 2 MiB loaded + 2 x 512 KiB left by a and b: 3 MiB
    assert d.has_room()
    d.drop(version("c").name)  # 1 MiB loaded + 3 x 512 KiB
    d.get(version("e"))  # 2 MiB + 1.5 MiB: 3.5 MiB
    assert d.has_room()
    d.get(version("f"))  # 3 MiB + 1.5 MiB over 4: `d` goes, 2 MiB + 2 MiB is at the cap
    assert short(d) == ["e", "f"] and not d.has_room()


def test_the_residue_follows_how_the_process_keeps_its_metrics(tmp_path: Path) -> None:
    assert Deployments(tmp_path).residue == footprint.RESIDUE["metrics off"]
    # In one process (no PROMETHEUS_MULTIPROC_DIR) the label children hold the values: more.
    one = Deployments(tmp_path, instruments=Instruments()).residue
    assert one == footprint.residue(True, False) == footprint.RESIDUE["one process"]
    assert footprint.residue(True, True) == footprint.RESIDUE["multiprocess"] < one
