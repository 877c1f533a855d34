"""gunicorn sizes itself from the CPUs the container may use; explicit settings win."""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any

import pytest

from core import settings as settings_module
from core.settings import Settings, available_cpus, available_memory

GUNICORN_CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def cgroup(tmp_path: Path, v2: str | None = None, v1: tuple[int, int] | None = None) -> Path:
    tmp_path.mkdir()
    if v2 is not None:
        (tmp_path / "cpu.max").write_text(v2 + "\n")
    if v1 is not None:
        (tmp_path / "cpu").mkdir()
        (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(f"{v1[0]}\n")
        (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(f"{v1[1]}\n")
    return tmp_path


def test_cpus_follow_affinity_and_cgroup_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert available_cpus(tmp_path / "none") == affinity
    assert available_cpus(cgroup(tmp_path / "a", v2="max 100000")) == affinity
    assert available_cpus(cgroup(tmp_path / "b", v2="50000 100000")) == min(affinity, 0.5)
    assert available_cpus(cgroup(tmp_path / "c", v1=(-1, 100000))) == affinity
    assert available_cpus(cgroup(tmp_path / "d", v1=(25000, 100000))) == min(affinity, 0.25)
    assert available_cpus(cgroup(tmp_path / "e", v2="400000 100000")) == min(affinity, 4)


GIB = 1024 ** 3


@pytest.mark.parametrize(("cpus", "layout"), [
    (0.5, (1, 64)), (1, (1, 64)), (1.5, (2, 32)), (2, (2, 32)), (4, (4, 16)), (8, (8, 8)),
    (64, (8, 8)),
])
def test_layout_from_cpus(cpus: float, layout: tuple[int, int]) -> None:
    assert Settings().worker_layout(cpus, memory=16 * GIB) == layout


@pytest.mark.parametrize(("memory", "layout"), [
    (512 * 1024 ** 2, (2, 8)), (1 * GIB, (2, 16)), (2 * GIB, (2, 32)), (64 * 1024 ** 2, (2, 4)),
])
def test_threads_held_to_the_memory(memory: int, layout: tuple[int, int]) -> None:
    assert Settings().worker_layout(2, memory=memory) == layout


def test_memory_from_meminfo_and_cgroup_limit(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        8388608 kB\nMemFree:  1 kB\n")
    assert available_memory(tmp_path / "none", meminfo) == 8 * GIB
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "memory.max").write_text("2147483648\n")
    assert available_memory(tmp_path / "v2", meminfo) == 2 * GIB
    (tmp_path / "unlimited").mkdir()
    (tmp_path / "unlimited" / "memory.max").write_text("max\n")
    assert available_memory(tmp_path / "unlimited", meminfo) == 8 * GIB
    (tmp_path / "v1" / "memory").mkdir(parents=True)
    (tmp_path / "v1" / "memory" / "memory.limit_in_bytes").write_text(f"{GIB}\n")
    assert available_memory(tmp_path / "v1", meminfo) == GIB


def test_explicit_settings_win() -> None:
    assert Settings(workers=3).worker_layout(8, memory=16 * GIB) == (3, 21)
    assert Settings(threads=2).worker_layout(4) == (4, 2)
    assert Settings(workers=1, threads=32).worker_layout(8) == (1, 32)


def test_grpc_is_served_in_the_gunicorn_workers_unless_told() -> None:
    assert Settings().grpc_in_workers() and Settings().grpc_processes() == 0
    assert Settings(workers=3).grpc_in_workers()
    # MLEMU_GRPC_WORKERS: that many processes of their own, none in the workers
    assert Settings(grpc_workers=1).grpc_processes() == 1
    assert Settings(workers=1, grpc_workers=4).grpc_processes() == 4
    assert not Settings(grpc_workers=4).grpc_in_workers()
    # no gRPC port: no gRPC anywhere
    assert not Settings(grpc_port=0).grpc_in_workers()
    assert Settings(grpc_port=0, grpc_workers=2).grpc_processes() == 0
    # each gRPC process runs its calls in 4 threads, or MLEMU_THREADS (at least 4) when set
    assert Settings().grpc_threads() == 4
    assert Settings(threads=2).grpc_threads() == 4
    assert Settings(threads=16).grpc_threads() == 16
    # Unset (or 0) means "from the CPUs", and only explicit values reach child processes.
    unset = Settings.from_env({"MLEMU_WORKERS": "", "MLEMU_THREADS": "0"})
    assert (unset.workers, unset.threads) == (None, None)
    assert "MLEMU_WORKERS" not in unset.to_env() and "MLEMU_THREADS" not in unset.to_env()
    explicit = Settings.from_env(Settings(workers=3, threads=6).to_env())
    assert (explicit.workers, explicit.threads) == (3, 6)


def load_conf(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], cpus: float) -> dict[str, Any]:
    for name in list(os.environ):
        if name.startswith(("MLEMU_", "AIP_")) or name == "PORT":
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(settings_module, "available_cpus", lambda: cpus)
    monkeypatch.setattr(settings_module, "available_memory", lambda: 16 * GIB)
    return runpy.run_path(str(GUNICORN_CONF))


def test_gunicorn_conf_sizes_from_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = load_conf(monkeypatch, {"PORT": "9000", "MLEMU_HOST": "0.0.0.0"}, cpus=4)
    assert (conf["workers"], conf["threads"], conf["bind"]) == (4, 16, "0.0.0.0:9000")
    assert conf["worker_class"] == "deploy.worker.KeepAliveThreadWorker" and conf["graceful_timeout"] < 10
    conf = load_conf(monkeypatch, {"MLEMU_WORKERS": "1"}, cpus=4)
    assert (conf["workers"], conf["threads"]) == (1, 64)
    conf = load_conf(monkeypatch, {"MLEMU_WORKERS": "2", "MLEMU_THREADS": "3"}, cpus=4)
    assert (conf["workers"], conf["threads"]) == (2, 3)


def test_free_memory_is_mem_available_within_the_cgroups_room(tmp_path):
    from core.sizing import free_memory

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 8000000 kB\nMemFree: 100 kB\nMemAvailable: 4000000 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    assert free_memory(cgroup, meminfo) == 4_000_000 * 1024
    (cgroup / "memory.max").write_text("3000000000\n")
    (cgroup / "memory.current").write_text("2000000000\n")
    assert free_memory(cgroup, meminfo) == 1_000_000_000
    (cgroup / "memory.max").write_text("max\n")
    assert free_memory(cgroup, meminfo) == 4_000_000 * 1024
