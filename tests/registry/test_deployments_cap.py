"""The bound on loaded versions (MLEMU_MAX_LOADED_VERSIONS, registry/deployments.py): the least
recently used predictor is unloaded beyond the cap, reloads on demand, and a predictor still in
use by a request or a batch when it is unloaded keeps working and is freed afterwards."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest

from core.errors import ModelLoadError
from predictors.base import Predictor
from registry.deployments import Deployments
from registry.resources import Version


class Doubler(Predictor):
    """Answers 2 x each instance; `gate`, when set, holds predict until it is released."""

    framework = "TEST"
    batchable = True

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.closed = False

    @classmethod
    def from_path(cls, model_dir: str) -> Doubler:
        return cls(model_dir)

    def predict(self, instances: list[Any], **kwargs: Any) -> Any:
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        assert not self.closed, "predict on a closed predictor"
        return [2 * x for x in instances]

    def close(self) -> None:
        self.closed = True


def version(name: str, uid: str = "u1") -> Version:
    return Version(name=f"projects/p/models/m/versions/{name}", deployment_uri=name, state="READY",
                   uid=uid)


class Counting:
    """A loader that records every load."""

    def __init__(self) -> None:
        self.loads: list[str] = []
        self.fail: set[str] = set()

    def __call__(self, v: Version) -> Predictor:
        self.loads.append(v.deployment_uri)
        if v.deployment_uri in self.fail:
            raise ModelLoadError("broken")
        return Doubler(v.deployment_uri)


def deployments(tmp_path: Path, cap: int) -> tuple[Deployments, Counting]:
    loader = Counting()
    return Deployments(tmp_path, loader=loader, max_loaded=cap), loader


def short(d: Deployments) -> list[str]:
    return sorted(name.rsplit("/", 1)[1] for name in d.loaded())


def test_the_least_recently_used_version_is_unloaded_beyond_the_cap(tmp_path: Path) -> None:
    d, loader = deployments(tmp_path, 2)
    a, b, c = version("a"), version("b"), version("c")
    d.get(a)
    d.get(b)
    d.get(a)  # b is now the least recently used
    d.get(c)
    assert short(d) == ["a", "c"]
    assert not d.is_loaded(b) and d.serves(b)  # unloaded by the cap, still serving
    assert d.get(b).predict([1]) == [2]  # reloads on demand ...
    assert loader.loads == ["a", "b", "c", "b"]
    assert short(d) == ["b", "c"]  # ... and unloads a, the least recently used by then


def test_hits_do_not_reload_and_no_cap_keeps_everything(tmp_path: Path) -> None:
    d, loader = deployments(tmp_path, 0)
    names = [version(f"v{i}") for i in range(300)]
    for v in names + names:
        d.get(v)
    assert len(d.loaded()) == 300
    assert loader.loads == [v.deployment_uri for v in names]


def test_failed_loads_do_not_count_against_the_cap(tmp_path: Path) -> None:
    d, loader = deployments(tmp_path, 2)
    loader.fail = {"bad"}
    d.get(version("a"))
    d.get(version("b"))
    for _ in range(2):  # remembered: not retried, and it evicts nothing
        with pytest.raises(ModelLoadError):
            d.get(version("bad"))
    assert short(d) == ["a", "b"]
    assert loader.loads == ["a", "b", "bad"]
    assert not d.serves(version("bad"))


def test_a_re_created_or_deleted_version_is_no_longer_counted_as_serving(tmp_path: Path) -> None:
    d, _ = deployments(tmp_path, 1)
    d.get(version("a"))
    d.get(version("b"))
    assert d.serves(version("a"))
    assert not d.serves(version("a", uid="u2"))  # another incarnation was never loaded
    assert d.prune(lambda name: None if name.endswith("/a") else "u1") == [version("a").name]
    assert not d.serves(version("a"))
    d.drop(version("b").name)
    assert not d.serves(version("b")) and d.loaded() == {}


def _request(batcher: Any, x: int, answers: list[Any]) -> None:
    answers.append(batcher.predict([x]))


def test_a_predictor_in_use_when_unloaded_finishes_and_is_then_freed(tmp_path: Path) -> None:
    d, _ = deployments(tmp_path, 1)
    a = version("a")
    busy = d.get(a)
    assert isinstance(busy, Doubler)
    busy.gate = threading.Event()
    answers: list[Any] = []
    # A batched request and a second one queued behind it, both on `a`, as dataplane runs them.
    batcher = d.batchers.get(busy, 64)
    threads = [threading.Thread(target=_request, args=(batcher, x, answers)) for x in (1, 2)]
    threads[0].start()
    assert busy.entered.wait(30)
    threads[1].start()
    d.get(version("b"))  # unloads a while its requests are in flight
    assert short(d) == ["b"]
    busy.gate.set()
    for t in threads:
        t.join(30)
    assert sorted(answers) == [[2], [4]]
    assert not busy.closed
    gone = weakref.ref(busy)
    del busy, batcher, threads
    gc.collect()
    assert gone() is None  # nothing (its batcher included) keeps an unloaded model alive
    assert d.get(a).predict([3]) == [6]


def test_concurrent_requests_over_more_versions_than_the_cap(tmp_path: Path) -> None:
    d, _ = deployments(tmp_path, 3)
    versions = [version(f"v{i}") for i in range(8)]
    errors: list[BaseException] = []

    def client(k: int) -> None:
        try:
            for i in range(200):
                v = versions[(i * (k + 1)) % len(versions)]
                assert d.batchers.get(d.get(v), 64).predict([i]) == [2 * i]
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(d.loaded()) <= 3
    assert all(d.serves(v) for v in versions)
