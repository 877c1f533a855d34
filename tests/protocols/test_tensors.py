"""protocols/tensors.py (with tensor_binary.py and grps_tensors.py): wire tensors <-> numpy,
instances and predictions (pure, in-process)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from core.errors import Internal, InvalidArgument
from protocols import grps_tensors, tensor_binary
from protocols import tensors as t

NUMERIC = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
           "FP32", "FP64"]


@pytest.mark.parametrize("datatype", NUMERIC)
def test_json_and_binary_forms_agree_for_every_numeric_datatype(datatype: str) -> None:
    values = [[True, False, True], [False, True, True]] if datatype == "BOOL" else [[1, 2, 3],
                                                                                      [4, 5, 127]]
    from_json = t.from_values("x", datatype, (2, 3), values)
    raw = tensor_binary.to_binary(from_json)
    assert len(raw) == 6 * np.dtype(t.NUMPY_DTYPES[datatype]).itemsize
    from_raw = tensor_binary.from_binary("x", datatype, (2, 3), raw)
    np.testing.assert_array_equal(from_json.data, from_raw.data)
    assert t.to_values(from_raw) == [v for row in values for v in row]
    assert t.from_values("x", datatype, (6,), from_json.data.reshape(-1).tolist()).data.shape == (6,)


def test_binary_is_little_endian() -> None:
    tensor = t.Tensor("x", "INT32", np.array([1, 256], dtype=np.int32))
    assert tensor_binary.to_binary(tensor) == struct.pack("<2i", 1, 256)
    assert tensor_binary.from_binary("x", "FP64", (1,), struct.pack("<d", 2.5)).data.tolist() == [2.5]


def test_fp16_and_bf16_only_as_binary() -> None:
    half = tensor_binary.from_binary("h", "FP16", (2,), np.array([1.5, -2.0], dtype="<f2").tobytes())
    assert half.data.dtype == np.float16 and half.data.tolist() == [1.5, -2.0]
    bf16 = struct.pack("<2H", 0x3FC0, 0xC000)  # 1.5, -2.0: the high halves of their float32s
    brain = tensor_binary.from_binary("b", "BF16", (2,), bf16)
    assert brain.data.tolist() == [1.5, -2.0]
    assert tensor_binary.to_binary(brain) == bf16
    for datatype in ("FP16", "BF16"):
        with pytest.raises(InvalidArgument, match="binary"):
            t.from_values("x", datatype, (1,), [1.0])
        with pytest.raises(InvalidArgument, match="binary_data"):
            t.to_values(t.Tensor("x", datatype, np.zeros(1, np.float32)))


def test_bytes_are_length_prefixed() -> None:
    tensor = t.from_values("s", "BYTES", (3,), ["a", "héllo", ""])
    raw = tensor_binary.to_binary(tensor)
    assert raw == b"\x01\x00\x00\x00a\x06\x00\x00\x00h\xc3\xa9llo\x00\x00\x00\x00"
    assert tensor_binary.from_binary("s", "BYTES", (3,), raw).data.tolist() == [b"a", "héllo".encode(), b""]
    with pytest.raises(InvalidArgument, match="expected 2 BYTES elements"):
        tensor_binary.from_binary("s", "BYTES", (2,), raw)
    with pytest.raises(InvalidArgument, match="truncated BYTES element length"):
        tensor_binary.from_binary("s", "BYTES", (1,), b"\x01\x00")
    with pytest.raises(InvalidArgument, match="UTF-8"):
        t.to_values(t.Tensor("s", "BYTES", np.array([b"\xff"], dtype=object)))


@pytest.mark.parametrize(("datatype", "value"), [("INT64", 1.5), ("INT32", True), ("FP32", "1"),
                                                 ("BOOL", 1), ("BYTES", 3), ("FP64", None),
                                                 ("INT8", 128), ("UINT8", -1)])
def test_json_elements_must_fit_the_datatype(datatype: str, value: object) -> None:
    with pytest.raises(InvalidArgument, match="input 'x'"):
        t.from_values("x", datatype, (1,), [value])


def test_shape_and_datatype_checks() -> None:
    with pytest.raises(InvalidArgument, match="needs 4 elements, but data has 3"):
        t.from_values("x", "FP32", (2, 2), [[1, 2], [3]])
    with pytest.raises(InvalidArgument, match="needs 16 bytes"):
        tensor_binary.from_binary("x", "FP32", (2, 2), b"\x00" * 12)
    with pytest.raises(InvalidArgument, match="unknown datatype"):
        t.check_datatype("STRING", "input 'x'")
    for shape in ([-1], "2", [1.5], [True]):
        with pytest.raises(InvalidArgument, match="non-negative integers"):
            t.check_shape(shape, "input 'x'")


def test_instances_one_input_rows_several_inputs_objects() -> None:
    a = t.from_values("a", "FP32", (2, 2), [1, 2, 3, 4])
    s = t.from_values("s", "BYTES", (2,), ["x", "y"])
    assert t.to_instances([a]) == [[1.0, 2.0], [3.0, 4.0]]
    assert t.to_instances([s]) == ["x", "y"]
    assert t.to_instances([a, s]) == [{"a": [1.0, 2.0], "s": "x"}, {"a": [3.0, 4.0], "s": "y"}]
    with pytest.raises(InvalidArgument, match="first \\(batch\\) dimension"):
        t.to_instances([a, t.from_values("b", "INT64", (3,), [1, 2, 3])])
    with pytest.raises(InvalidArgument, match="scalar"):
        t.to_instances([t.from_values("c", "INT64", (), [1])])
    raw = t.from_values("r", "BYTES", (1,), ["x"])
    raw.data[0] = b"\xff"
    assert t.to_instances([raw]) == [b"\xff"]  # not UTF-8: stays bytes


def test_predictions_to_outputs() -> None:
    [classes] = t.from_predictions([0, 2, 1], {"output-0": "INT64"})
    assert (classes.name, classes.datatype, classes.shape) == ("output-0", "INT64", [3])
    [probs] = t.from_predictions([[0.5, 0.5], [0.1, 0.9]], {"scores": "FP32"})
    assert (probs.name, probs.datatype, probs.shape) == ("scores", "FP32", [2, 2])
    [labels] = t.from_predictions(["a", "b"], {"output-0": "INT64"})
    assert labels.datatype == "BYTES" and labels.data.tolist() == ["a", "b"]
    [inferred] = t.from_predictions([1.5, 2.5], {})
    assert (inferred.name, inferred.datatype) == ("output-0", "FP64")
    [flags] = t.from_predictions([True, False], {})
    assert flags.datatype == "BOOL"
    named = t.from_predictions([{"p": 0.5, "label": "x"}, {"label": "y", "p": 1}], {})
    assert [(o.name, o.datatype, o.data.tolist()) for o in named] == [
        ("p", "FP64", [0.5, 1.0]), ("label", "BYTES", ["x", "y"])]
    with pytest.raises(Internal, match="keys differ"):
        t.from_predictions([{"a": 1}, {"b": 2}], {})
    with pytest.raises(Internal, match="cannot be encoded"):
        t.from_predictions([[1, 2], [3]], {})


def test_grps_flat_values() -> None:
    half = t.from_flat("h", "FP16", (2,), [0.5, 1.0])
    assert half.data.dtype == np.float16
    assert grps_tensors.to_flat(t.Tensor("b", "BOOL", np.array([True, False])), "UINT8") == [1, 0]
    assert grps_tensors.to_flat(t.Tensor("s", "BYTES", np.array([b"x"], dtype=object))) == ["x"]
    with pytest.raises(InvalidArgument, match="does not fit INT8"):
        t.from_flat("x", "INT8", (1,), [300])
    for datatype in t.DATATYPES:
        assert datatype in grps_tensors.GRPS_OUTPUT_DTYPES
