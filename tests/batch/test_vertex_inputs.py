"""Vertex AI's csv and file-list batch inputs (batch/vertex_csv.py, batch/vertex_inputs.py): CSV
rows to array instances (quoted strings, unquoted floats, bad rows as errors of their own, the
header), listed files to `{"b64": ...}` instances under the data roots and the size bound, and
the records the predicting step decodes from them."""

from __future__ import annotations

import base64
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from batch import records, vertex_csv, vertex_inputs
from batch.records import Refused
from batch.spec import CSV_INPUT, FILE_LIST_INPUT, JobSpec


def _spec(fmt: str, roots: list[str] | None = None) -> JobSpec:
    return JobSpec(input_paths=[], data_format=fmt, output_path="", model_dir="",
                   data_roots=roots)


def _read(fmt: str, path: Path, roots: list[str] | None = None, size: int = 64) -> list[Any]:
    """Every record of one input file, as the predicting step decodes it (JSON, or the reason)."""
    decoder = records.Decoder(cast(Any, SimpleNamespace(framework="SCIKIT_LEARN")), "", built=True)
    out: list[Any] = []
    for batch in vertex_inputs.batches(_spec(fmt, roots), (str(path), 0, -1), size):
        assert len(batch) <= size
        for record in batch:
            try:
                out.append(decoder.instance(record))
            except ValueError as exc:
                out.append(("error", str(exc)))
    return out


def test_a_row_is_an_array_of_quoted_strings_and_unquoted_floats() -> None:
    assert vertex_csv.instance(b'0.1,1.2,"cat1"', 3) == [0.1, 1.2, "cat1"]
    assert vertex_csv.instance(b'"a,b","say ""hi""",7,-2e3', 4) == ["a,b", 'say "hi"', 7.0, -2000.0]
    assert vertex_csv.instance(b'"",1', 2) == ["", 1.0]  # an empty quoted value is a string
    assert vertex_csv.instance('"\u00e9t\u00e9", 3 '.encode(), 2) == ["\u00e9t\u00e9", 3.0]
    nan = vertex_csv.instance(b"nan,1", 2)[0]
    assert math.isnan(nan)
    assert vertex_csv.header(b'\xef\xbb\xbf"a","b",c') == ["a", "b", "c"]


@pytest.mark.parametrize("line, why", [
    (b"1,2", "the row has 2 values but the header has 3"),
    (b"1,2,3,4", "the row has 4 values but the header has 3"),
    (b"1,2,", "value 3 ('') is not quoted, so it must be a number"),
    (b"1,cat,2", "value 2 ('cat') is not quoted, so it must be a number"),
    (b'1,"open,2', "a quoted value is not closed"),
    (b'1,"a"b,2', "unexpected text after the closing quote of value 2"),
    (b'1,a"b",2', "value 2 has a quote but does not start with one"),
    (b"1,2,\xff", "the line is not UTF-8 text"),
    (b"", "the row has 1 values but the header has 3"),
])
def test_a_row_that_is_no_instance_says_why(line: bytes, why: str) -> None:
    with pytest.raises(ValueError) as caught:
        vertex_csv.instance(line, 3)
    assert str(caught.value).startswith(why)


def test_a_csv_file_skips_its_header_and_reports_bad_rows_in_place(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(b'"x","y","label"\r\n1,2,"a"\n3,4\n"5",6,"b, c"\n' + b"7,8," + b'"z' * 80
                     + b"\n9,10,\"d\"")  # no final line end
    got = _read(CSV_INPUT, path, size=2)
    assert got[0] == [1.0, 2.0, "a"]
    assert got[1] == ("error", "CSV row 2 is not a valid instance: the row has 2 values but the "
                               "header has 3: 3,4")
    assert got[2] == ["5", 6.0, "b, c"]
    assert got[3][0] == "error" and got[3][1].startswith("CSV row 4 is not a valid instance") \
        and got[3][1].endswith("...")  # a long row is quoted in part
    assert got[4] == [9.0, 10.0, "d"] and len(got) == 5


def test_a_header_only_csv_has_no_instances_and_a_headerless_one_fails(tmp_path: Path) -> None:
    (tmp_path / "head.csv").write_bytes(b'"a","b"\n')
    (tmp_path / "empty.csv").write_bytes(b"")
    assert _read(CSV_INPUT, tmp_path / "head.csv") == []
    assert _read(CSV_INPUT, tmp_path / "empty.csv") == []
    (tmp_path / "bad.csv").write_bytes(b'"a,b\n1,2\n')
    with pytest.raises(ValueError, match="The first line of CSV input .* must be its header: a "
                                         "quoted value is not closed"):
        _read(CSV_INPUT, tmp_path / "bad.csv")
    (tmp_path / "blank.csv").write_bytes(b"\n1,2\n")
    with pytest.raises(ValueError, match="must be its header"):
        _read(CSV_INPUT, tmp_path / "blank.csv")


def test_listed_files_are_b64_instances_under_the_roots(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.bin").write_bytes(b"\x00\xffimage")
    (root / "big.bin").write_bytes(b"x" * 65)
    (root / "dir").mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"secret")
    os.symlink(outside, root / "link.txt")
    os.mkfifo(root / "pipe")
    monkeypatch.setattr(vertex_inputs, "MAX_LISTED_FILE_BYTES", 64)
    names = [f"{root}/a.bin", "", f"  file://{root}/a.bin  ", f"{root}/big.bin", f"{root}/dir",
             f"{root}/pipe", f"{root}/none.bin", str(outside), f"{root}/link.txt", "rel/a.bin",
             "s3://b/a.bin", f"{tmp_path}/none.bin"]
    listing = root / "files.txt"
    listing.write_text("\n".join(names) + "\n")
    got = _read(FILE_LIST_INPUT, listing, roots=[str(root.resolve())])
    wanted = {"b64": base64.b64encode(b"\x00\xffimage").decode()}
    assert got[:2] == [wanted, wanted]  # the blank line names nothing
    assert [message for _, message in got[2:]] == [
        f"{root}/big.bin is 65 bytes or more; batch prediction reads listed files of at most 64 "
        "bytes.",
        f"{root}/dir is not a regular file.",
        f"{root}/pipe is not a regular file.",  # never opened for a blocking read
        f"{root}/none.bin: no such file.",
        *[f"{name} is not allowed: batch prediction data must be under a directory this server "
          "keeps job data in (MLEMU_DATA_ROOTS)." for name in (outside, f"{root}/link.txt")],
        *[f"{name}: a file list names Cloud Storage URIs (gs://bucket/object) or absolute local "
          "paths." for name in ("rel/a.bin", "s3://b/a.bin")],
        # Outside the roots, a missing file reads as a refused one: nothing is revealed there.
        f"{tmp_path}/none.bin is not allowed: batch prediction data must be under a directory "
        "this server keeps job data in (MLEMU_DATA_ROOTS).",
    ]
    assert _read(FILE_LIST_INPUT, listing, roots=None)[7] == {
        "b64": base64.b64encode(b"secret").decode()}  # no roots: anywhere


def test_batches_of_listed_files_are_bounded_in_bytes(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(6):
        (tmp_path / f"{i}.bin").write_bytes(bytes([i]) * 300)
    (tmp_path / "list.txt").write_text("\n".join(f"{tmp_path}/{i}.bin" for i in range(6)))
    monkeypatch.setattr(vertex_inputs.sources, "BATCH_BYTES", 1000)
    sizes = [len(b) for b in vertex_inputs.batches(_spec(FILE_LIST_INPUT), (
        str(tmp_path / "list.txt"), 0, -1), 64)]
    assert sizes == [2, 2, 2]  # each record ~410 bytes of base64: two fit in 1000


def test_refused_records_survive_pickling_and_decode_as_their_reason() -> None:
    import pickle

    record = pickle.loads(pickle.dumps(Refused("why not")))
    assert isinstance(record, Refused) and record.message == "why not" and record == b""
    decoder = records.Decoder(cast(Any, SimpleNamespace(framework="SCIKIT_LEARN")), "", built=True)
    instances, bad = decoder.instances([b"[1.0, NaN]", record, json.dumps(["x"]).encode()])
    assert len(instances) == 2 and math.isnan(instances[0][1]) and bad == ["why not"]
