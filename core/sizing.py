"""How much CPU and memory this process may use (affinity, cgroup v1/v2 quotas, MemAvailable):
what the worker layout, XGBoost's wide calls and local batch workers are sized from."""

from __future__ import annotations

import os
from pathlib import Path

#: worker_layout's bounds when MLEMU_WORKERS / MLEMU_THREADS are unset.
MAX_AUTO_WORKERS = 8
AUTO_TOTAL_THREADS = 64
MIN_AUTO_THREADS = 4
#: Memory budgeted per serving thread: a 1.5 MB body (AI Platform's request limit, our default
#: MLEMU_MAX_REQUEST_BYTES) decodes to ~10x that in Python objects, plus the answer, with room.
MEMORY_PER_THREAD = 32 * 1024 * 1024


def available_memory(cgroup_root: Path = Path("/sys/fs/cgroup"),
                     meminfo: Path = Path("/proc/meminfo")) -> int:
    """Bytes this process may use: the machine's memory, capped by a cgroup memory limit
    (cgroup v2 `memory.max`, v1 `memory/memory.limit_in_bytes`; Cloud Run and Kubernetes set
    one). Unknown (not Linux): AUTO_TOTAL_THREADS' worth."""
    total = AUTO_TOTAL_THREADS * MEMORY_PER_THREAD
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    for limit in (cgroup_root / "memory.max", cgroup_root / "memory" / "memory.limit_in_bytes"):
        try:
            text = limit.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
        break
    return total


def free_memory(cgroup_root: Path = Path("/sys/fs/cgroup"),
                meminfo: Path = Path("/proc/meminfo")) -> int:
    """Bytes that can be allocated now without swapping: the kernel's MemAvailable, capped by
    what this cgroup's memory limit leaves (cgroup v2 memory.max - memory.current, v1
    limit_in_bytes - usage_in_bytes). Unknown (not Linux): available_memory()."""
    free = None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if free is None:
        return available_memory(cgroup_root, meminfo)
    for limit, used in ((cgroup_root / "memory.max", cgroup_root / "memory.current"),
                        (cgroup_root / "memory" / "memory.limit_in_bytes",
                         cgroup_root / "memory" / "memory.usage_in_bytes")):
        try:
            cap, current = limit.read_text().strip(), used.read_text().strip()
        except OSError:
            continue
        if cap.isdigit() and current.isdigit():
            free = min(free, max(0, int(cap) - int(current)))
        break
    return free


def available_cpus(cgroup_root: Path = Path("/sys/fs/cgroup")) -> float:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota.

    Containers (Cloud Run, Kubernetes limits, `docker run --cpus`) usually limit CPU with a CFS
    quota while os.cpu_count() still reports every host CPU; cgroup v2 exposes it as `cpu.max`
    ("QUOTA PERIOD" or "max PERIOD"), cgroup v1 as cpu.cfs_quota_us / cpu.cfs_period_us.
    """
    try:
        cpus = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        cpus = float(os.cpu_count() or 1)
    quota = _cgroup_quota(cgroup_root)
    return min(cpus, quota) if quota else cpus


def _cgroup_quota(root: Path) -> float | None:
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return int(quota) / int(period) if quota != "max" and int(period) > 0 else None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    except (OSError, ValueError):
        return None
