"""Vertex AI's `csv`, `file-list` and `tf-record` batch inputs read through Beam's FileSystems:
each file's records become JSON instances here, in the reading step, so the predicting step
decodes them like any jsonl record (records.Decoder with `built`); jsonl and ml v1's formats are
batch/sources.py's as read.

- tf-record, tf-record-gzip: each record's bytes are the instance `{"b64": "<base64>"}`, whatever
  they hold (Vertex AI never parses a record as JSON, unlike ml v1, batch/records.py).

- csv (batch/vertex_csv.py has the rules): a file is read whole, its first line the header, each
  other line one row; a row that is no instance is a `Refused` record (one line of the errors
  file). A file whose header is not a CSV line fails the job. When the job's instanceConfig
  names fields, a row is the object of the header's names (batch/vertex_instances.py then
  makes the model's instance of it).
- file-list: each line of a list file names one file, a gs:// URI or (as for a job's own inputs)
  an absolute local path, which must resolve under the server's data roots (MLEMU_DATA_ROOTS,
  JobSpec.data_roots) as a directly named input must; that file's bytes are the instance
  `{"b64": "<base64>"}` (google/cloud/aiplatform/v1/batch_prediction_job.proto,
  InstanceConfig.instance_type: "For `file-list`, each file in the list will be converted to an
  object in the format of `{"b64": <value>}`", googleapis/googleapis). A listed file is read up
  to MAX_LISTED_FILE_BYTES; a longer one, a missing one, one not allowed or not a regular file
  is a `Refused` record naming the file as listed. Blank lines name nothing and are skipped.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator, Sequence

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from batch import sources, vertex_csv
from batch.records import Oversized, Refused
from batch.spec import CSV_INPUT, FILE_LIST_INPUT, JobSpec
from batch.vertex_instances import InstanceConfig
from core import wirejson

#: Largest file a file-list names that a job reads (its base64 text, 4/3 of it, still fits
#: batch/records.py's MAX_RECORD_BYTES). Larger ones are errors, never read whole.
MAX_LISTED_FILE_BYTES = 16 * 1024 * 1024
#: Seconds Cloud Storage has to deliver one listed file before the job fails saying why.
READ_ANSWER_S = 120.0


def instance_config(spec: JobSpec) -> InstanceConfig:
    """The job's instanceConfig (batch/vertex_instances.py)."""
    return InstanceConfig.from_request(spec.instance_config, spec.data_format == CSV_INPUT)


def batches(spec: JobSpec, rng: sources.Range, size: int) -> Iterator[list[bytes]]:
    """A range's records, `size` at a time (fewer when they hold more than
    sources.BATCH_BYTES): csv rows, listed files and a Vertex AI job's TFRecords as JSON
    instances, other formats as read."""
    if spec.data_format == CSV_INPUT:
        named = instance_config(spec).names_fields
        yield from sources.by_bytes(csv_records(rng[0], size, named), size)
    elif spec.data_format == FILE_LIST_INPUT:
        answer_s = max(spec.storage_answer_s, READ_ANSWER_S)
        yield from sources.by_bytes(listed_records(rng[0], spec.data_roots, answer_s), size)
    elif spec.built_records:  # Vertex AI's tf-record, tf-record-gzip
        for batch in sources.batches(spec.data_format, rng, size):
            yield [b64_record(record) for record in batch]
    else:
        yield from sources.batches(spec.data_format, rng, size)


def b64_record(record: bytes) -> bytes:
    """A TFRecord's data as the instance `{"b64": "<base64>"}` (the proto's InstanceConfig
    .instance_type: "For `tf-record`/`tf-record-gzip`, each record will be converted to an
    object in the format of `{"b64": <value>}`"); an Oversized record stays one."""
    if isinstance(record, Oversized):
        return record
    return b'{"b64":"' + base64.b64encode(record) + b'"}'


def csv_records(path: str, size: int, named: bool = False) -> Iterator[bytes]:
    """A CSV file's data rows, each a JSON array (`named`: an object of the header's names, for
    an instanceConfig naming fields) or a Refused record; ValueError (the job fails) when its
    first line is not a header, or (`named`) names a column twice."""
    names: list[str] = []
    number = 0
    for lines in sources.text_batches(path, 0, -1, size):
        for line in lines:
            if not names:
                names = _names(path, line, named)
                continue
            number += 1
            if isinstance(line, Oversized):
                yield Refused(f"CSV row {number} is not a valid instance: it is {line.size} bytes, "
                              f"longer than a record may be.")
                continue
            try:
                row = vertex_csv.instance(line, len(names))
            except ValueError as exc:
                yield Refused(vertex_csv.row_error(number, line, str(exc)))
                continue
            yield _json(dict(zip(names, row, strict=True)) if named else row)


def _names(path: str, line: bytes, named: bool) -> list[str]:
    if not isinstance(line, Oversized):
        try:
            names = vertex_csv.header(line)
        except ValueError as exc:
            raise ValueError(f"The first line of CSV input {path} must be its header: "
                             f"{exc}.") from None
        if named and len(set(names)) < len(names):
            raise ValueError(f"The header of CSV input {path} names a column twice, so "
                             "instance_config cannot name its fields.")
        if names != [""]:
            return names
    raise ValueError(f"The first line of CSV input {path} must be its header (the names of its "
                     "columns), and it is not.")


def _json(row: object) -> bytes:
    return wirejson.dumps(row)  # NaN and Infinity too, as an unquoted "nan" reads


def listed_records(path: str, roots: Sequence[str] | None, answer_s: float) -> Iterator[bytes]:
    """A file list's named files, each `{"b64": ...}` or a Refused record saying why not."""
    for lines in sources.text_batches(path, 0, -1, 1024):
        for line in lines:
            if isinstance(line, Oversized):
                yield Refused(f"A line of file list {path} is {line.size} bytes long: not a "
                              "file name.")
                continue
            try:
                name = line.decode("utf-8").strip()
            except UnicodeDecodeError:
                yield Refused(f"A line of file list {path} is not UTF-8 text.")
                continue
            if not name:
                continue
            try:
                data = read_listed(name, roots, answer_s)
            except ListedFileError as exc:
                yield Refused(str(exc))
                continue
            yield b'{"b64":"' + base64.b64encode(data) + b'"}'


class ListedFileError(Exception):
    """Why a file a file-list names is not an instance (the errors file says it)."""


def read_listed(name: str, roots: Sequence[str] | None, answer_s: float) -> bytes:
    """The bytes of the file `name` (as listed), at most MAX_LISTED_FILE_BYTES."""
    local = name.removeprefix("file://")
    if name.startswith("gs://"):
        return _read_remote(name, answer_s)
    if "://" in local or not os.path.isabs(local):
        raise ListedFileError(f"{name}: a file list names Cloud Storage URIs (gs://bucket/object)"
                              " or absolute local paths.")
    real = os.path.realpath(local)
    if roots is not None and not sources.within(real, roots):
        # The same words whether or not anything is there.
        raise ListedFileError(f"{name} is not allowed: batch prediction data must be under a "
                              "directory this server keeps job data in (MLEMU_DATA_ROOTS).")
    try:
        # Non-blocking: a FIFO swapped in after the check must not hold the worker; no
        # following a symlink swapped in for the resolved file either.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        raise ListedFileError(f"{name}: no such file.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ListedFileError(f"{name} is not a regular file.")
        if info.st_size > MAX_LISTED_FILE_BYTES:
            raise ListedFileError(_too_big(name, info.st_size))
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_LISTED_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_LISTED_FILE_BYTES:  # it grew since
        raise ListedFileError(_too_big(name, len(data)))
    return data


def _too_big(name: str, size: int) -> str:
    return (f"{name} is {size} bytes or more; batch prediction reads listed files of at most "
            f"{MAX_LISTED_FILE_BYTES} bytes.")


def _read_remote(name: str, answer_s: float) -> bytes:
    def read() -> tuple[bytes, str]:
        try:
            with FileSystems.open(name, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                return f.read(MAX_LISTED_FILE_BYTES + 1), ""
        except Exception as exc:  # noqa: BLE001 - a missing object is this instance's error
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            return b"", f"{name} cannot be read: {lines[0][:300]}"

    # A read that never answers fails the job (sources.bounded); one that fails is an error row.
    data, why = sources.bounded(read, answer_s, f"Cloud Storage ({name})")
    if why:
        raise ListedFileError(why)
    if len(data) > MAX_LISTED_FILE_BYTES:
        raise ListedFileError(_too_big(name, len(data)))
    return data
