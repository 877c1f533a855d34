"""batch/sources.py: input patterns to byte ranges, and ranges to records, read exactly as Beam's
own sources would: every line once whatever the range boundaries, `\\r\\n` and blank lines,
compressed text read whole, TFRecord framing (as TensorFlow writes it)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest

from batch import sources


def _tfrecord(records: list[bytes]) -> bytes:
    # uint64 length, masked CRC (not checked by the reader), data, masked CRC
    return b"".join(struct.pack("<Q", len(r)) + b"\0" * 4 + r + b"\0" * 4 for r in records)


def test_every_line_once_across_any_range_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [f'{{"i": {i}, "pad": "{"x" * (i % 37)}"}}'.encode() for i in range(3000)]
    lines[10] = b""  # a blank line is a record, as in ReadFromText
    path = tmp_path / "big.json"
    path.write_bytes(b"\n".join(lines[:1500]) + b"\r\n" + b"\n".join(lines[1500:]))  # no final \n
    for step, block in ((1, 1), (7, 3), (64, 5), (1000, 4096), (4096, 999)):
        monkeypatch.setattr(sources, "MIN_RANGE_BYTES", step)
        monkeypatch.setattr(sources, "RANGE_BYTES", step)
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)  # lines cross blocks, and ranges
        ranges = sources.expand([str(tmp_path / "big*.json")], "JSON", workers=2)
        assert len(ranges) > 1 and ranges[0][1] == 0 and ranges[-1][2] == path.stat().st_size
        got = [r for rng in ranges for r in sources.records("JSON", rng)]
        assert got == lines, step
        for rng in ranges[:3]:  # batches of `size`, the range's last one shorter
            sizes = [len(b) for b in sources.batches("JSON", rng, 16)]
            assert all(n == 16 for n in sizes[:-1]) and 0 < sizes[-1] <= 16 if sizes else True


def test_compressed_text_and_tfrecords_are_read_whole(tmp_path: Path) -> None:
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(b"[1]\n[2]\n"))
    ranges = sources.expand([str(tmp_path / "a.json.gz")], "TEXT", workers=2)
    assert ranges == [(str(tmp_path / "a.json.gz"), 0, -1)]
    assert list(sources.records("TEXT", ranges[0])) == [b"[1]", b"[2]"]
    records = [b'{"x": [1, 2]}', b"", b"\x00\xffbinary"]
    (tmp_path / "r.tfrecord").write_bytes(_tfrecord(records))
    (tmp_path / "r.tfrecord.gz").write_bytes(gzip.compress(_tfrecord(records)))
    for fmt, name in (("TF_RECORD", "r.tfrecord"), ("TF_RECORD_GZIP", "r.tfrecord.gz")):
        (rng,) = sources.expand([str(tmp_path / name)], fmt, workers=2)
        assert list(sources.records(fmt, rng)) == records
    (tmp_path / "bad.tfrecord").write_bytes(b"\x05\x00")
    with pytest.raises(ValueError, match="is not a TFRecord file"):
        list(sources.records("TF_RECORD", (str(tmp_path / "bad.tfrecord"), 0, -1)))


def test_a_pattern_matching_nothing_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"No files found for input path .*/none-\*\.json"):
        sources.expand([str(tmp_path / "none-*.json")], "JSON", workers=1)
