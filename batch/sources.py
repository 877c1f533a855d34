"""Reading a job's inputs through Beam's FileSystems (local paths, gs://, anything Beam reads):
the input patterns expanded into byte ranges, and each range read as batches of records.

The pipeline reads ranges, not single records, because Beam's per-element cost in Python (over
ReadFromText -> Reshuffle -> BatchElements on the DirectRunner) made a job many times slower than
one process predicting the same file in a loop (bench/NOTES.md); a range is one element and a batch of
`batchSize` records is the next, so Beam's cost is paid per batch. Semantics follow Beam's own
sources: a text range holds the lines that *start* in it (TextSource), `\\n` or `\\r\\n` ends a
line, blank lines are records; a TFRecord file is read whole (records cannot be found from an
arbitrary offset); `.gz`/`.bz2`/... text files are read whole, decompressed by extension
(CompressionTypes.AUTO) as ReadFromText does. TFRecord checksums are not verified.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

#: Text files are split into equal ranges of at most this size (few enough that a range is
#: worth a Beam element; small enough that a cancel or a retry loses little).
RANGE_BYTES = 8 * 1024 * 1024
MIN_RANGE_BYTES = 256 * 1024
#: Text is read this much at a time (a compressed file, read whole, is never held whole).
BLOCK_BYTES = 1024 * 1024
TEXT_FORMATS = ("JSON", "TEXT")

Range = tuple[str, int, int]  # path, start, end (-1: to the end, the file read whole)


def expand(patterns: list[str], data_format: str, workers: int) -> list[Range]:
    """Every matched file, in ranges; ValueError naming a pattern that matches nothing."""
    ranges: list[Range] = []
    for pattern in dict.fromkeys(patterns):
        try:
            found = FileSystems.match([pattern])[0].metadata_list
        except Exception as exc:  # noqa: BLE001 - Beam raises BeamIOError for bad buckets etc.
            raise ValueError(f"Cannot read input path {pattern}: {exc}") from None
        if not found:
            raise ValueError(f"No files found for input path {pattern}.")
        for meta in sorted(found, key=lambda m: m.path):
            whole = data_format not in TEXT_FORMATS or \
                CompressionTypes.detect_compression_type(meta.path) != CompressionTypes.UNCOMPRESSED
            if whole or meta.size_in_bytes <= MIN_RANGE_BYTES:
                ranges.append((meta.path, 0, -1))
                continue
            ranges += split(meta.path, meta.size_in_bytes, workers)
    return ranges


def split(path: str, size: int, workers: int) -> list[Range]:
    """A text file in equal ranges of at most RANGE_BYTES, as many as a multiple of `workers`.
    The DirectRunner's FnApiRunner hands a stage's input to its workers once, element i to
    worker i % workers (ParallelBundleManager: no work stealing), so equal ranges in a multiple
    of the workers give each the same share of every file; a short last range left one worker
    up to a range's work (~0.2 s at 8 MiB) behind the other."""
    count = workers * -(-size // (workers * RANGE_BYTES))
    count = max(1, min(count, size // MIN_RANGE_BYTES))
    step = -(-size // count)
    return [(path, start, min(start + step, size)) for start in range(0, size, step)]


def text_batches(path: str, start: int, end: int, size: int) -> Iterator[list[bytes]]:
    """The lines starting in [start, end) (the whole file for end == -1), without line ends,
    `size` at a time. Read in blocks and split in C: a job's worker spends no Python call per
    line here."""
    compression = CompressionTypes.AUTO if end == -1 else CompressionTypes.UNCOMPRESSED
    with FileSystems.open(path, compression_type=compression) as f:
        pos = 0
        if start > 0:  # the line running into this range belongs to the previous one
            f.seek(start - 1)
            pos = start - 1 + len(f.readline())
        pending: list[bytes] = []
        carry = b""  # the beginning of a line the blocks so far have not ended
        while end == -1 or pos < end:
            block = f.read(BLOCK_BYTES if end == -1 else min(BLOCK_BYTES, end - pos))
            if not block:
                break
            pos += len(block)
            if end != -1 and pos >= end and not block.endswith(b"\n"):
                block += f.readline()  # the range's last line runs on past its end
            lines = (carry + block).split(b"\n")
            carry = lines.pop()
            pending += [line.removesuffix(b"\r") for line in lines] if b"\r" in block else lines
            whole = len(pending) - len(pending) % size
            yield from (pending[i:i + size] for i in range(0, whole, size))
            del pending[:whole]
        if carry:  # a last line without a line end
            pending.append(carry.removesuffix(b"\r"))
        if pending:
            yield pending


def tfrecord_records(path: str, gzip: bool) -> Iterator[bytes]:
    """TFRecord framing: uint64 length, uint32 masked CRC, data, uint32 masked CRC."""
    compression = CompressionTypes.GZIP if gzip else CompressionTypes.UNCOMPRESSED
    with FileSystems.open(path, compression_type=compression) as f:
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise ValueError(f"{path} is not a TFRecord file (truncated record header).")
            (length,) = struct.unpack("<Q", header[:8])
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                raise ValueError(f"{path} is not a TFRecord file (truncated record).")
            yield data


def batches(data_format: str, rng: Range, size: int) -> Iterator[list[bytes]]:
    """A range's records, `size` at a time (the last batch of the range may be shorter)."""
    path, start, end = rng
    if data_format in TEXT_FORMATS:
        yield from text_batches(path, start, end, size)
        return
    batch: list[bytes] = []
    for record in tfrecord_records(path, gzip=data_format == "TF_RECORD_GZIP"):
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def records(data_format: str, rng: Range) -> Iterator[bytes]:
    """A range's records one by one."""
    for batch in batches(data_format, rng, 1024):
        yield from batch
