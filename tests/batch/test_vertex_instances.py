"""Vertex AI's batch instanceConfig (batch/vertex_instances.py): the create-time refusals of
invalid combinations, the instance each input becomes for the model and what its output line
shows (`instance` as read, or `key`), and a job's records through the reading and predicting
steps (batch/vertex_inputs.py, batch/vertex_records.py) for jsonl, csv and tf-record."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any, cast

import pytest

from batch import records, vertex_inputs, vertex_records
from batch.spec import CSV_INPUT, JobSpec
from batch.vertex_instances import InstanceConfig, problem


@pytest.mark.parametrize(("config", "fmt", "words"), [
    ({"instanceType": "row"}, "jsonl", 'instance_type "row" is not supported'),
    ({"instanceType": "array"}, "csv", 'does not apply to instances_format "csv"'),
    ({"instanceType": "object"}, "tf-record", 'does not apply to instances_format "tf-record"'),
    ({"includedFields": ["a"], "excludedFields": ["b"]}, "jsonl", "cannot both be set"),
    ({"keyField": "k"}, "file-list", 'key_field cannot be used with instances_format "file-list"'),
    ({"excludedFields": ["a"]}, "tf-record-gzip", "excluded_fields cannot be used"),
    ({"includedFields": [""]}, "jsonl", "included_fields must be a list of field names"),
    ({"keyField": ["k"]}, "jsonl", "key_field must be a field name"),
    ({"excludedFields": ["f"] * 10_001}, "jsonl", "may name at most 10000 fields"),
])
def test_invalid_combinations_are_refused_saying_why(config: dict[str, Any], fmt: str,
                                                     words: str) -> None:
    assert words in problem(config, fmt)


@pytest.mark.parametrize(("config", "fmt"), [
    ({}, "tf-record"), ({"instanceType": "array", "includedFields": ["b", "a"]}, "jsonl"),
    ({"keyField": "id", "excludedFields": ["x"]}, "csv"), ({"instanceType": "object"}, "jsonl")])
def test_valid_combinations_pass(config: dict[str, Any], fmt: str) -> None:
    assert problem(config, fmt) == ""


def _apply(config: dict[str, Any], instance: Any, csv: bool = False) -> Any:
    return InstanceConfig.from_request(config, csv).apply(instance)


LINE = {"id": "r1", "a": 1, "b": [2, 3], "c": "x"}


def test_jsonl_objects_are_transformed_and_the_line_shows_the_instance_or_key() -> None:
    assert _apply({}, LINE) == (LINE, {"instance": LINE})
    assert _apply({"keyField": "id"}, LINE) == ({"a": 1, "b": [2, 3], "c": "x"}, {"key": "r1"})
    # Excluded fields are not sent but stay attached to the output (the instance as read).
    assert _apply({"excludedFields": ["c", "a"]}, LINE) == ({"id": "r1", "b": [2, 3]},
                                                           {"instance": LINE})
    assert _apply({"includedFields": ["c", "a"]}, LINE) == ({"c": "x", "a": 1},
                                                           {"instance": LINE})
    # array: included_fields give the order; the key is never sent even when included.
    assert _apply({"instanceType": "array", "includedFields": ["c", "id", "a"],
                   "keyField": "id"}, LINE) == (["x", 1], {"key": "r1"})
    assert _apply({"instanceType": "array"}, [1, 2]) == ([1, 2], {"instance": [1, 2]})
    assert _apply({"instanceType": "object"}, LINE) == (LINE, {"instance": LINE})


@pytest.mark.parametrize(("config", "instance", "words"), [
    ({"instanceType": "array"}, LINE, "set included_fields"),
    ({"instanceType": "object"}, [1, 2], 'instance_type "object" needs one'),
    ({"keyField": "id"}, [1, 2], "key_field needs one"),
    ({"keyField": "nope"}, LINE, 'no key field "nope"'),
    ({"includedFields": ["a", "zz"]}, LINE, "no field 'zz'"),
])
def test_an_instance_that_cannot_be_sent_is_an_error_of_its_own(
        config: dict[str, Any], instance: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        _apply(config, instance)


def test_csv_rows_are_arrays_in_column_order_and_show_as_read() -> None:
    row = {"id": "r1", "x": 1.0, "y": 2.0}
    assert _apply({"keyField": "id"}, row, csv=True) == ([1.0, 2.0], {"key": "r1"})
    assert _apply({"excludedFields": ["x"]}, row, csv=True) == (["r1", 2.0],
                                                               {"instance": ["r1", 1.0, 2.0]})
    assert _apply({"includedFields": ["y", "x"]}, row, csv=True) == (
        [2.0, 1.0], {"instance": ["r1", 1.0, 2.0]})


class Echo:
    """Stands in for a model: each prediction is the instance it got."""

    framework = "SCIKIT_LEARN"


def _job(fmt: str, path: Path, config: dict[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """A one-file Vertex AI job's output lines, through the reading and predicting steps."""
    spec = JobSpec(input_paths=[str(path)], data_format=fmt, output_path="", model_dir="",
                   layout="vertex", instance_config=config)
    decoder = records.Decoder(cast(Any, Echo()), "", built=spec.built_records)
    lines: list[str] = []
    bad: list[str] = []
    for batch in vertex_inputs.batches(spec, (str(path), 0, -1), 64):
        done, failed, _ = vertex_records.predict_batch(decoder, lambda i: list(i), batch,
                                                       vertex_inputs.instance_config(spec))
        lines += done
        bad += failed
    return ([json.loads(x) for chunk in lines for x in chunk.splitlines()],
            [json.loads(x) for x in bad])


def test_a_jsonl_job_with_a_key_field(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 7, "v": [1, 2]}\n[1, 2]\n{"v": 3}\n')
    done, bad = _job("JSON", path, {"keyField": "id"})
    assert done == [{"key": 7, "prediction": {"v": [1, 2]}}]
    assert [b["instance"] for b in bad] == [[1, 2], {"v": 3}]
    assert bad[1]["error"] == {"status": "INVALID_ARGUMENT",
                               "message": 'The instance has no key field "id".'}


def test_a_csv_job_with_a_key_column(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text('"id","x","y"\n"a",1,2\n"b",3\n')
    done, bad = _job(CSV_INPUT, path, {"keyField": "id"})
    assert done == [{"key": "a", "prediction": [1.0, 2.0]}]
    assert bad[0]["instance"] is None and "the row has 2 values" in bad[0]["error"]["message"]
    assert _job(CSV_INPUT, path, None)[0] == [{"instance": ["a", 1.0, 2.0],
                                               "prediction": ["a", 1.0, 2.0]}]


def test_a_csv_header_naming_a_column_twice_fails_a_job_naming_fields(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text('"x","x"\n1,2\n')
    assert _job(CSV_INPUT, path, None)[0][0]["instance"] == [1.0, 2.0]
    with pytest.raises(ValueError, match="names a column twice"):
        _job(CSV_INPUT, path, {"excludedFields": ["x"]})


def _tfrecord(path: Path, datas: list[bytes]) -> None:
    # The framing only (batch/sources.py does not check the CRCs).
    path.write_bytes(b"".join(struct.pack("<Q", len(d)) + b"\0" * 4 + d + b"\0" * 4
                              for d in datas))


def test_vertex_tfrecords_are_b64_objects_whatever_they_hold(tmp_path: Path) -> None:
    path = tmp_path / "in.tfrecord"
    datas = [b'{"a": 1}', b"\x00\xff binary", b""]
    _tfrecord(path, datas)
    done, bad = _job("TF_RECORD", path, None)
    shown = [{"b64": base64.b64encode(d).decode()} for d in datas]
    assert bad == [] and done == [{"instance": s, "prediction": s} for s in shown]
    # ml v1 reads the same record as a JSON instance.
    spec = JobSpec(input_paths=[], data_format="TF_RECORD", output_path="", model_dir="")
    assert not spec.built_records
    assert next(vertex_inputs.batches(spec, (str(path), 0, -1), 64))[0] == b'{"a": 1}'


def test_shard_names_are_vertex_ais() -> None:
    assert vertex_records.shard_name(vertex_records.PREDICTIONS, 3) == "predictions_00003.jsonl"
    assert vertex_records.shard_name(vertex_records.ERRORS, 0) == "errors_00000.jsonl"
