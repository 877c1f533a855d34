"""controls/journal_file.py and the journal on it: lines written through the mapping are read
whole by other processes at once, across windows and reopenings, a clear under a live writer in
another process hides only what came before, and a file that cannot be allocated fails no request."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from controls import journal_file
from controls.journal import Journal
from controls.journal_file import WINDOW, AppendFile, content
from tests.kit import journalkit


def test_lines_across_window_edges_read_back_whole(tmp_path: Path) -> None:
    out = AppendFile(tmp_path / "f.jsonl", 4 * WINDOW)
    lines = [(f'{{"n":{n},"pad":"' + "x" * (997 + n % 13) + '"}\n').encode() for n in range(200)]
    for line in lines:
        out.write(line)
    out.close()
    assert sum(map(len, lines)) > 2 * WINDOW  # the lines crossed window edges
    assert content(tmp_path / "f.jsonl") == b"".join(lines)
    assert os.path.getsize(tmp_path / "f.jsonl") == 4 * WINDOW  # allocated up front
    again = AppendFile(tmp_path / "f.jsonl", 4 * WINDOW)  # the same pid's file, reopened
    assert again.end == sum(map(len, lines))
    again.write(b'{"n":"last"}\n')
    again.close()
    assert content(tmp_path / "f.jsonl").endswith(b'"pad":"' + b"x" * (997 + 199 % 13)
                                                  + b'"}\n{"n":"last"}\n')


def test_another_process_reads_a_writers_rows_at_once_and_a_clear_spares_later_ones(
        tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    journal.record(journalkit.row(0))  # the parent's own file
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write, tell, wait, write again; never returns to pytest
        try:
            os.close(to_child_w)
            os.close(to_parent_r)
            journal.record(journalkit.row(1, model="child"))
            os.write(to_parent_w, b"1")
            os.read(to_child_r, 1)
            journal.record(journalkit.row(3, model="child"))
            os.write(to_parent_w, b"3")
            os.read(to_child_r, 1)
        finally:
            os._exit(0)
    os.close(to_child_r)
    os.close(to_parent_w)
    try:
        assert os.read(to_parent_r, 1) == b"1"
        assert [(r["timestamp"], r["model"]) for r in journal.entries({})] == [
            (1_000.0, "m"), (1_001.0, "child")]  # the child is alive, its row already readable
        journal.clear()
        assert journal.entries({}) == []
        journal.record(journalkit.row(2))
        os.write(to_child_w, b"g")
        assert os.read(to_parent_r, 1) == b"3"
        assert [(r["timestamp"], r["model"]) for r in journal.entries({})] == [
            (1_002.0, "m"), (1_003.0, "child")]
    finally:
        os.close(to_child_w)  # the child's waits end (end of file) wherever it is
        os.waitpid(pid, 0)
        os.close(to_parent_r)
    journal.clear()  # the child is gone: its file and its mark go with it
    assert sorted(p.name for p in (tmp_path / "j").iterdir()) == [f"{os.getpid()}.cleared",
                                                                  f"{os.getpid()}.jsonl"]
    assert journal.entries({}) == []


def test_a_file_that_cannot_be_allocated_fails_no_request(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    journal = Journal(tmp_path / "j")
    with monkeypatch.context() as patch:
        patch.setattr(journal_file.os, "posix_fallocate", full)
        journal.record(journalkit.row(0))  # no exception: the row is lost, the request is not
    assert journal.entries({}) == []
    journal.record(journalkit.row(1))  # room again: the next request's row is kept
    assert [r["timestamp"] for r in journal.entries({})] == [1_001.0]


def test_rows_cleared_stay_gone_when_their_file_rotates(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j", max_bytes=2_000)
    for n in range(12):  # about two files' worth: one rotation, an .old file left
        journal.record(journalkit.row(n))
    assert {p.suffix for p in (tmp_path / "j").iterdir()} == {".jsonl", ".old"}
    journal.clear()  # the .old goes; the live file is marked
    assert journal.entries({}) == []
    kept = []
    for n in range(100, 112):  # rotates the cleared file into .old
        journal.record(journalkit.row(n))
        kept.append(1_000.0 + n)
    stamps = [r["timestamp"] for r in journal.entries({})]
    assert stamps and all(stamp >= 1_100.0 for stamp in stamps)  # nothing from before the clear
    assert stamps == kept[-len(stamps):]
