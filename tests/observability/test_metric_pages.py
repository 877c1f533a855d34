"""A metric file's pages leave the process's memory after an unload (metric_files.release_pages,
called by Instruments.forget): the values stay in the file, and a page comes back only when a
value on it is written or read again."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.mmap_dict import MmapedDict

from observability import metric_files
from observability.metric_files import SafeMmapedDict

PAGE_KIB = 4


def mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping's header
            inside = len(head) >= 6 and head[5] == str(path)
        elif inside and line.startswith("Rss:"):
            total += int(head[1])
    return total


def test_released_pages_leave_memory_and_keep_their_values(tmp_path: Path) -> None:
    path = tmp_path / "histogram_1.db"
    values = SafeMmapedDict(str(path))
    keys = [f"series {i:05d} " + "x" * 200 for i in range(4000)]  # about 1 MiB of series
    for i, key in enumerate(keys):
        values.write_value(key, float(i), 0.0)
    touched = mapped_kib(path)
    assert touched >= 64 * PAGE_KIB  # every page written since the file was last remapped
    metric_files.release_pages()
    assert mapped_kib(path) == 0
    values.write_value(keys[-1], 1.5, 0.0)  # a loaded version's series: its page only comes back
    assert mapped_kib(path) <= 2 * PAGE_KIB
    assert values.read_value(keys[0]) == (0.0, 0.0)
    assert values.read_value(keys[-1]) == (1.5, 0.0)
    assert [values.read_value(key)[0] for key in keys[1:-1]] == [float(i) for i in
                                                                 range(1, len(keys) - 1)]
    values.close()
    # What a scrape reads (prometheus_client's reader of the file): every value still there.
    read = {key: value for key, value, _, _ in MmapedDict.read_all_values_from_file(str(path))}
    assert read == {**{key: float(i) for i, key in enumerate(keys)}, keys[-1]: 1.5}
