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


def _oversized(records: list[bytes]) -> list[int | bytes]:
    from batch.records import Oversized

    return [r.size if isinstance(r, Oversized) else r for r in records]


def test_a_line_longer_than_a_record_may_be_is_read_past(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """It stands in its batch as one Oversized record of its size, wherever the ranges and
    blocks fall, and is never held: reading a 40 MB line holds a few blocks at a time."""
    import tracemalloc

    monkeypatch.setattr(sources, "MAX_RECORD_BYTES", 1 << 20)
    long_line = b"[" + b"1.0, " * 8_000_000 + b"1.0]"  # 40 MB
    path = tmp_path / "big.json"
    path.write_bytes(b"[1]\n" + long_line + b"\r\n[2]\n" + long_line)
    expected = [b"[1]", len(long_line) + 1, b"[2]", len(long_line)]  # its size counts its \r
    for step in (1 << 20, 7 << 20, 64 << 20):
        monkeypatch.setattr(sources, "MIN_RANGE_BYTES", step)
        monkeypatch.setattr(sources, "RANGE_BYTES", step)
        ranges = sources.expand([str(path)], "JSON", workers=2)
        tracemalloc.start()
        got = [r for rng in ranges for r in sources.records("JSON", rng)]
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert _oversized(got) == expected, step
        assert peak < 8 << 20, peak


def test_a_tfrecord_longer_than_a_record_may_be_is_read_past(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "MAX_RECORD_BYTES", 1000)
    (tmp_path / "r.tfrecord").write_bytes(_tfrecord([b"a", b"x" * 5000, b"b"]))
    (rng,) = sources.expand([str(tmp_path / "r.tfrecord")], "TF_RECORD", workers=1)
    assert _oversized(list(sources.records("TF_RECORD", rng))) == [b"a", 5000, b"b"]


def test_batches_of_long_records_are_bounded_in_bytes(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "BATCH_BYTES", 10_000)
    (tmp_path / "a.json").write_bytes((b"[" + b"1," * 1000 + b"1]\n") * 50)  # 2 KB lines
    (rng,) = sources.expand([str(tmp_path / "a.json")], "JSON", workers=1)
    sizes = [len(b) for b in sources.batches("JSON", rng, 1024)]
    assert sum(sizes) == 50 and max(sizes) <= 6


def test_an_output_path_that_now_resolves_out_of_the_roots_is_refused(tmp_path: Path) -> None:
    """jobs.create checked outputPath; a symlink on its way changed since is caught when the
    pipeline is built, before anything is written."""
    import apache_beam as beam

    from batch import pipeline
    from batch.spec import JobSpec

    root = tmp_path / "data"
    root.mkdir()
    (root / "in.json").write_text("[1]\n")
    (root / "out").symlink_to(tmp_path / "elsewhere")
    spec = JobSpec(input_paths=[str(root / "in.json")], data_format="JSON",
                   output_path=str(root / "out"), model_dir=str(tmp_path),
                   data_roots=[str(root.resolve())])
    with pytest.raises(ValueError, match="is outside the directories"):
        pipeline.build(beam.Pipeline(), spec)
    assert not (tmp_path / "elsewhere").exists()
    spec.output_path = str(root / "fine")
    pipeline.build(beam.Pipeline(), spec)  # inside the roots: built
