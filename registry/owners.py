"""Who runs a long-running operation: an owner id naming one process, and whether that process
is provably gone.

An owner id is `host|boot id|pid namespace|pid|process start time|random`. Pids can be compared
only within one host, boot and pid namespace; the kernel's start time tells a reused pid from the
process that claimed the work. Anything else (another machine, another container) is unknowable
from here, and the caller falls back to the lease.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from pathlib import Path


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str:
    """The kernel's start time of `pid` (tells a reused pid from the original process)."""
    stat = _read(f"/proc/{pid}/stat")
    return stat.rsplit(")", 1)[-1].split()[19] if stat else ""


def _machine() -> str:
    """This host, boot and pid namespace: pids are comparable only within all three."""
    ns = ""
    with contextlib.suppress(OSError):
        ns = os.readlink("/proc/self/ns/pid")
    return f"{socket.gethostname()}|{_read('/proc/sys/kernel/random/boot_id')}|{ns}"


def this_owner() -> str:
    pid = os.getpid()
    return f"{_machine()}|{pid}|{_start_time(pid)}|{secrets.token_hex(4)}"


def owner_is_dead(owner: str) -> bool:
    """True only when `owner` provably no longer runs; False when unknown (wait for its lease).

    Instances on other hosts (or in other containers) share the store through PostgreSQL, so a
    pid is compared only when the boot id and the pid namespace are both known and equal: the
    boot id is random per boot on Linux and per sandbox under gVisor (Cloud Run), while host
    names (and namespace inode numbers) can repeat across machines.
    """
    parts = owner.split("|")
    if len(parts) != 6 or not parts[1] or not parts[2] or "|".join(parts[:3]) != _machine() \
            or not parts[4] or not parts[3].isdigit():
        return False
    return _start_time(int(parts[3])) != parts[4]  # gone, or the pid now belongs to another process
