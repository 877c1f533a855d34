"""The cap on loaded versions' estimated memory (MLEMU_MAX_LOADED_MB, registry/footprint.py):
which versions go after a load (sizes injected, no timing), how a version is sized from its
files, and the cap at work in Deployments alongside the count cap."""

from __future__ import annotations

import threading
from pathlib import Path

from registry import footprint
from registry.deployments import Deployments
from registry.resources import Version
from tests.registry.test_deployments_cap import Counting, short, version

MB = 1 << 20


def test_nothing_goes_while_both_caps_hold() -> None:
    others = [(1, "a", 3 * MB), (2, "b", 3 * MB)]
    assert footprint.evictions(others, 3 * MB, 3, 9 * MB) == []
    assert footprint.evictions(others, 3 * MB, 0, 0) == []


def test_the_least_recently_used_go_until_the_bytes_fit() -> None:
    others = [(5, "recent", 2 * MB), (1, "oldest", 1 * MB), (3, "middle", 4 * MB)]
    # 2 + 1 + 4 + 5 = 12 MB against 8: the oldest (1 MB) is not enough, the middle one is next.
    assert footprint.evictions(others, 5 * MB, 0, 8 * MB) == ["oldest", "middle"]


def test_the_count_cap_and_the_byte_cap_each_bind() -> None:
    others = [(1, "a", MB), (2, "b", MB), (3, "c", MB)]
    assert footprint.evictions(others, MB, 2, 100 * MB) == ["a", "b"]  # the count binds
    assert footprint.evictions(others, 30 * MB, 10, 31 * MB) == ["a", "b"]  # the bytes bind
    assert footprint.evictions(others, 30 * MB, 10, 32 * MB) == ["a"]  # at the cap is in


def test_a_version_larger_than_the_cap_stays_alone() -> None:
    others = [(1, "a", MB), (2, "b", MB)]
    assert footprint.evictions(others, 50 * MB, 0, 10 * MB) == ["a", "b"]
    # At the next load it is the least recently used, and goes first.
    assert footprint.evictions([(3, "huge", 50 * MB)], MB, 0, 10 * MB) == ["huge"]


def test_room_is_left_only_below_both_caps() -> None:
    assert footprint.has_room(1, 5 * MB, 2, 10 * MB)
    assert not footprint.has_room(2, 5 * MB, 2, 10 * MB)
    assert not footprint.has_room(1, 10 * MB, 2, 10 * MB)
    assert footprint.has_room(1000, 10**12, 0, 0)


def test_an_estimate_reads_the_files_with_the_frameworks_factor(tmp_path: Path) -> None:
    (tmp_path / "variables").mkdir()
    (tmp_path / "model.joblib").write_bytes(b"x" * 4000)
    (tmp_path / "variables" / "v.data").write_bytes(b"x" * 1000)
    (tmp_path / "link").symlink_to(tmp_path / "model.joblib")  # not counted twice
    assert footprint.disk_size(str(tmp_path)) == 5000
    assert footprint.estimate(str(tmp_path), "SCIKIT_LEARN") == footprint.OVERHEAD + 6250
    fixed, factor = footprint.FACTORS["TENSORFLOW"]
    assert footprint.estimate(str(tmp_path), "tensorflow") == \
        footprint.OVERHEAD + fixed + int(5000 * factor)
    assert footprint.estimate(str(tmp_path / "missing"), "XGBOOST") == footprint.OVERHEAD


def sized(tmp_path: Path, sizes: dict[str, int], max_bytes: int,
          max_loaded: int = 0) -> tuple[Deployments, Counting]:
    loader = Counting()
    # No residue: these are about the models' estimates (test_residue.py counts it).
    return Deployments(tmp_path, loader=loader, max_loaded=max_loaded, max_bytes=max_bytes,
                       sizer=lambda v, _p: sizes[v.deployment_uri], residue=0), loader


def test_deployments_unload_by_estimated_memory(tmp_path: Path) -> None:
    d, loader = sized(tmp_path, {"a": 4 * MB, "b": 4 * MB, "c": 6 * MB}, 10 * MB)
    d.get(version("a"))
    d.get(version("b"))
    d.get(version("a"))  # b is the least recently used
    assert d.loaded_bytes() == 8 * MB and d.has_room()
    d.get(version("c"))  # 14 MB: b goes, 10 MB fit
    assert short(d) == ["a", "c"] and d.loaded_bytes() == 10 * MB and not d.has_room()
    assert d.serves(version("b"))  # unloaded by the cap, still serving
    assert d.get(version("b")).predict([2]) == [4]
    assert short(d) == ["b", "c"]
    assert loader.loads == ["a", "b", "c", "b"]


def test_an_oversized_version_serves_and_is_the_next_to_go(tmp_path: Path) -> None:
    d, _ = sized(tmp_path, {"a": MB, "b": MB, "huge": 64 * MB}, 10 * MB)
    d.get(version("a"))
    d.get(version("b"))
    assert d.get(version("huge")).predict([1]) == [2]
    assert short(d) == ["huge"]
    d.get(version("a"))
    assert short(d) == ["a"]


def test_the_count_cap_still_holds_with_a_byte_cap(tmp_path: Path) -> None:
    d, _ = sized(tmp_path, {f"v{i}": MB for i in range(5)}, 100 * MB, max_loaded=2)
    for i in range(5):
        d.get(version(f"v{i}"))
    assert short(d) == ["v3", "v4"]


def test_a_reload_after_re_creation_counts_the_new_size_once(tmp_path: Path) -> None:
    d, _ = sized(tmp_path, {"a": 3 * MB}, 10 * MB)
    d.get(version("a"))
    d.get(version("a", uid="u2"))  # deleted and re-created: the old incarnation is replaced
    assert d.loaded_bytes() == 3 * MB
    d.drop(version("a").name)
    assert d.loaded_bytes() == 0


def test_concurrent_loads_under_a_byte_cap(tmp_path: Path) -> None:
    names = [f"v{i}" for i in range(12)]
    d, loader = sized(tmp_path, {n: MB for n in names}, 4 * MB)
    errors: list[BaseException] = []

    def client(k: int) -> None:
        try:
            for i in range(150):
                v = version(names[(i * (k + 1)) % len(names)])
                assert d.get(v).predict([i]) == [2 * i]
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    # Every load is followed by its own enforcement under the guard: the caps hold at rest.
    assert d.loaded_bytes() <= 4 * MB and len(d.loaded()) <= 4
    assert all(d.serves(version(n)) for n in names)


def test_the_default_loader_sizes_a_version_from_its_files(tmp_path: Path) -> None:
    from tests.kit import modelkit

    modelkit.sklearn_model(tmp_path / "m", kind="logreg", seed=0)
    v = Version(name="projects/p/models/m/versions/v", deployment_uri=str(tmp_path / "m"),
                framework="SCIKIT_LEARN", state="READY", uid="u1")
    d = Deployments(tmp_path / "pkgs")
    d.get(v)
    assert d.loaded_bytes() == footprint.estimate(str(tmp_path / "m"), "SCIKIT_LEARN")


def test_memory_is_trimmed_once_after_evictions_and_not_otherwise(tmp_path: Path) -> None:
    d, _ = sized(tmp_path, {"a": 6 * MB, "b": 6 * MB}, 10 * MB)
    calls: list[int] = []
    d.get(version("a"))
    assert not d.trim(lambda: calls.append(1))  # nothing unloaded yet
    d.get(version("b"))  # a goes
    assert d.trim(lambda: calls.append(1))
    assert not d.trim(lambda: calls.append(1))  # only once per round of evictions
    assert calls == [1]
    assert footprint.release_freed_memory()  # glibc: the real call runs
