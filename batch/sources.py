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

import os
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from batch.records import MAX_RECORD_BYTES, Oversized

#: Text files are split into equal ranges of at most this size (few enough that a range is
#: worth a Beam element; small enough that a cancel or a retry loses little).
RANGE_BYTES = 8 * 1024 * 1024
MIN_RANGE_BYTES = 256 * 1024
#: Text is read this much at a time (a compressed file, read whole, is never held whole).
BLOCK_BYTES = 1024 * 1024
#: Bytes of records a batch holds at most (records of up to MAX_RECORD_BYTES each): past it the
#: batch goes out shorter than `size`.
BATCH_BYTES = 64 * 1024 * 1024
TEXT_FORMATS = ("JSON", "TEXT")
#: Seconds Cloud Storage has to list a job's input pattern before the job fails saying why
#: (JobSpec.storage_answer_s).
REMOTE_ANSWER_S = 30.0
T = TypeVar("T")

Range = tuple[str, int, int]  # path, start, end (-1: to the end, the file read whole)


def bounded(call: Callable[[], T], seconds: float, what: str) -> T:
    """`call()`, or a ValueError saying `what` did not answer within `seconds`. Cloud Storage's
    clients retry for minutes when the service cannot be reached or Application Default
    Credentials cannot be found (google-api-core's default retry deadline is 120 s, and Beam's
    client probes for credentials first), which would keep a job RUNNING meanwhile; the call
    runs in a daemon thread the job's process leaves behind when it fails."""
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            outcome.append((False, exc))
        done.set()

    threading.Thread(target=run, name="bounded-io", daemon=True).start()
    if not done.wait(seconds):
        raise ValueError(f"{what} did not answer within {seconds:g} seconds. Check that the "
                         "bucket exists and is reachable and that credentials are available "
                         "(Application Default Credentials, or STORAGE_EMULATOR_HOST for a "
                         "Cloud Storage emulator).")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _match(pattern: str, remote_seconds: float) -> list[Any]:
    """The files a pattern matches; a remote (gs://) pattern within `remote_seconds`."""
    def match() -> list[Any]:
        return list(FileSystems.match([pattern])[0].metadata_list)

    if "://" not in pattern or pattern.startswith("file://"):
        return match()
    return bounded(match, remote_seconds, f"Cloud Storage ({pattern})")


OUTSIDE_ROOTS = ("Input path {pattern} matches a file outside the directories this server keeps "
                 "job data in (MLEMU_DATA_ROOTS).")


def within(path: str, roots: Sequence[str]) -> bool:
    """Whether resolved `path` is one of `roots` (resolved directories) or under one."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def confine(pattern: str, path: str, roots: Sequence[str] | None) -> str:
    """The file a local match of `pattern` really is (its symlinks resolved), which must lie
    under `roots`: the job's create checked the pattern as written, but a wildcard can match a
    symlink to anywhere, which Beam's glob would follow. The refusal names the pattern only,
    never where the link points, and is raised before a byte of the file is read. Reading the
    resolved path, not the link, also keeps a link swapped after this check from being read."""
    if "://" in path:
        return path  # a remote object: buckets, not roots, bound those
    real = os.path.realpath(path)
    if roots is not None and not within(real, roots):
        raise ValueError(OUTSIDE_ROOTS.format(pattern=pattern))
    return real


def expand(patterns: list[str], data_format: str, workers: int,
           roots: Sequence[str] | None = None,
           remote_seconds: float = REMOTE_ANSWER_S) -> list[Range]:
    """Every matched file, in ranges; ValueError naming a pattern that matches nothing, one that
    matches a local file resolving outside `roots` (None: anywhere), or a remote one that does
    not answer within `remote_seconds`."""
    ranges: list[Range] = []
    for pattern in dict.fromkeys(patterns):
        try:
            found = _match(pattern, remote_seconds)
        except Exception as exc:  # noqa: BLE001 - Beam raises BeamIOError for bad buckets etc.
            raise ValueError(f"Cannot read input path {pattern}: {exc}") from None
        if not found:
            raise ValueError(f"No files found for input path {pattern}.")
        # Every match is checked before any is read.
        files = sorted((confine(pattern, meta.path, roots), meta.size_in_bytes) for meta in found)
        for path, size in files:
            whole = data_format not in TEXT_FORMATS or \
                CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED
            if whole or size <= MIN_RANGE_BYTES:
                ranges.append((path, 0, -1))
                continue
            ranges += split(path, size, workers)
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


def _mark_long(lines: list[bytes]) -> list[bytes]:
    return [Oversized(len(line)) if len(line) > MAX_RECORD_BYTES else line for line in lines]


def by_bytes(records: Iterable[bytes], size: int = 0) -> Iterator[list[bytes]]:
    """`records` in order, in batches of at most BATCH_BYTES (or one record) and, with `size`,
    at most `size` records."""
    batch: list[bytes] = []
    held = 0
    for record in records:
        if batch and ((size and len(batch) >= size) or held + len(record) > BATCH_BYTES):
            yield batch
            batch, held = [], 0
        batch.append(record)
        held += len(record)
    if batch:
        yield batch


def text_batches(path: str, start: int, end: int, size: int) -> Iterator[list[bytes]]:
    """The lines starting in [start, end) (the whole file for end == -1), without line ends,
    `size` at a time (fewer when they hold more than BATCH_BYTES). Read in blocks and split in
    C: a job's worker spends no Python call per line here. A line longer than MAX_RECORD_BYTES
    is read past, never held: it stands in its batch as an `Oversized` (an error of its own)."""
    compression = CompressionTypes.AUTO if end == -1 else CompressionTypes.UNCOMPRESSED
    with FileSystems.open(path, compression_type=compression) as f:
        pos = 0
        if start > 0:  # the line running into this range belongs to the previous one
            f.seek(start - 1)
            pos = start - 1
            while True:  # read past it a block at a time: it may be longer than any record
                piece = f.readline(BLOCK_BYTES)
                pos += len(piece)
                if not piece or piece.endswith(b"\n"):
                    break
        pending: list[bytes] = []
        carry = b""  # the beginning of a line the blocks so far have not ended
        skipped = -1  # inside an over-long line: its bytes so far
        while True:
            past = end != -1 and pos >= end  # only the line running past the range's end is left
            if past and not carry and skipped < 0:
                break
            block = f.read(BLOCK_BYTES if end == -1 or past else min(BLOCK_BYTES, end - pos))
            if not block:
                break
            pos += len(block)
            if past and (cut := block.find(b"\n")) >= 0:
                block = block[:cut + 1]  # the rest starts the next range's lines
            if skipped >= 0:
                cut = block.find(b"\n")
                if cut < 0:
                    skipped += len(block)
                    continue
                pending.append(Oversized(skipped + cut))
                skipped, block = -1, block[cut + 1:]
            data = carry + block
            lines = data.split(b"\n")
            carry = lines.pop()
            if b"\r" in data:
                lines = [line.removesuffix(b"\r") for line in lines]
            pending += _mark_long(lines) if len(data) > MAX_RECORD_BYTES else lines
            if len(carry) > MAX_RECORD_BYTES:
                skipped, carry = len(carry), b""
            whole = len(pending) - len(pending) % size
            if whole == 0 and sum(map(len, pending)) > BATCH_BYTES:
                # Long records: short batches rather than gigabytes held.
                yield from by_bytes(pending)
                pending = []
                continue
            yield from (pending[i:i + size] for i in range(0, whole, size))
            del pending[:whole]
        if skipped >= 0:
            pending.append(Oversized(skipped))
        elif carry:  # a last line without a line end
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
            if length > MAX_RECORD_BYTES:  # read past it, never held
                left = length + 4
                while left > 0 and (piece := f.read(min(BLOCK_BYTES, left))):
                    left -= len(piece)
                if left > 0:
                    raise ValueError(f"{path} is not a TFRecord file (truncated record).")
                yield Oversized(length)
                continue
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
