"""registry/tasks.py on its own: several runners (as several processes or instances would) share
one store, and an orphaned task is adopted and run by exactly one of them."""

from __future__ import annotations

from pathlib import Path

from registry.store import SqliteStore
from tests.kit.taskrace import adopt_orphan_race


def test_an_orphan_is_adopted_by_exactly_one_of_many_runners(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    adopt_orphan_race(lambda: SqliteStore(path))


def test_a_pid_is_compared_only_on_the_same_known_machine() -> None:
    from registry import owners

    me = owners.this_owner()
    host, boot, ns, pid, start, rnd = me.split("|")
    assert not owners.owner_is_dead(me)
    gone = "999999999"  # above pid_max: no such process here
    assert owners.owner_is_dead("|".join([host, boot, ns, gone, start, rnd]))
    # Another boot (another machine, or another gVisor sandbox) or an unknown boot id or pid
    # namespace: nothing is provable from here, so the lease decides.
    for other in ([host, "other-boot", ns], [host, "", ns], [host, boot, ""], ["other", boot, ns]):
        assert not owners.owner_is_dead("|".join([*other, gone, start, rnd]))
