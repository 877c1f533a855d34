"""Open connections per gunicorn worker, in memory the master and its workers share.

Why: gunicorn's workers all accept from one listening socket, and which worker wins each
connection is up to the kernel and to which process happens to be awake. With a few long-lived
keep-alive connections (wrk's 8, a load balancer's pool, an HTTP client's pool) the split is often
uneven (6 and 2, or 5 and 3): the busier worker's threads then queue on its one GIL while the other
process has CPU to spare: an uneven split serves fewer requests with a longer tail than an even
one (measured in bench/NOTES.md, "Where the c=8 tail and the throughput swings came from").
deploy/worker.py reads this board before it accepts:
a worker that holds more connections than the least busy live worker lets that one take the
connection (bounded by a short wait, so a stuck or slow peer never delays a client for long).

The board is an anonymous shared mapping made in the master before the first fork (children
inherit it): one signed 64-bit slot per worker, -1 while unused. The master gives each new worker
a free slot (`claim`, in gunicorn's `pre_fork`) and frees it when the worker exits (`release`, in
`child_exit`); the worker publishes its count from its main loop's start and releases the slot
itself when told to stop, so a booting or draining worker is never waited for. Reads of the other
slots are plain loads: a stale count costs a less even split for a moment, never a refused
connection.
"""

from __future__ import annotations

import mmap
import struct

_SLOT = struct.Struct("q")
UNUSED = -1


class ConnectionBoard:
    """Each live worker's count of open connections (see the module docstring)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._memory = mmap.mmap(-1, slots * _SLOT.size)  # MAP_SHARED: the forks see writes
        self._counts = memoryview(self._memory).cast("q")
        for slot in range(slots):
            self._counts[slot] = UNUSED

    def claim(self, taken: set[int]) -> int | None:
        """A slot for a new worker (the master's, before the fork) that no live worker has, or
        None when every slot is taken (that worker then accepts as stock gunicorn does). The
        slot stays UNUSED until the worker's main loop starts and publishes its count."""
        for slot in range(self.slots):
            if slot not in taken:
                self._counts[slot] = UNUSED
                return slot
        return None

    def release(self, slot: int) -> None:
        """The worker in `slot` stops or exited: it is no place for connections to go."""
        self._counts[slot] = UNUSED

    def publish(self, slot: int, connections: int) -> None:
        self._counts[slot] = connections

    def others_hold_fewer(self, slot: int, connections: int) -> bool:
        """Whether some other live worker holds fewer open connections than `connections`."""
        counts = self._counts
        return any(UNUSED < counts[other] < connections
                   for other in range(self.slots) if other != slot)
