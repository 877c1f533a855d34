"""TF Serving's float texts written for a whole array at once (rapidjson_writer.write_decimals)
are write_decimal's, value by value, byte for byte: generated float32 and float64 values of every
kind (subnormals, huge and tiny exponents, whole numbers, -0.0, the %g / max_digits10 edges,
NaN and Infinity), and a million random bit patterns. One output's row-format answer built by
joining texts equals the PrettyWriter's, for every shape and dtype."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from predictors import rapidjson_writer
from predictors.rapidjson_writer import write_decimal, write_decimals
from protocols import tfserving_json

PROPERTY = settings(max_examples=500, deadline=None, derandomize=True, database=None)

EDGES = [0.0, -0.0, 1.0, -1.0, 0.1, 1e-4, 9.99999e-5, 1e-5, 999999.0, 999999.5, 1e6, 1e7, 123456.5,
         16777216.0, 16777217.0, 2.0 ** 53, 2.0 ** 53 + 2, 1e21, 1e22, 1e-7, 5e-324, 1e-45, 1.4e-45,
         1.17549435e-38, 3.4028235e38, 1.7976931348623157e308, 2.2250738585072014e-308,
         1234567.125, 0.30000001192092896, math.inf, -math.inf, math.nan]


@pytest.fixture(autouse=True, scope="module")
def bulk_for_any_size() -> Any:
    """Every array takes the one-go path, however few its values (FEW is a speed choice)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rapidjson_writer, "FEW", 1)
        yield


def per_value(array: np.ndarray, float32: bool) -> list[str]:
    return [write_decimal(v, float32) for v in array.reshape(-1).tolist()]


@PROPERTY
@given(values=st.lists(st.floats(width=32) | st.sampled_from(EDGES), max_size=30))
def test_float32_arrays_are_written_as_value_by_value(values: list[float]) -> None:
    with np.errstate(over="ignore"):
        array = np.asarray(values, np.float32)
    assert write_decimals(array, True) == per_value(array, True)


@PROPERTY
@given(values=st.lists(st.floats() | st.sampled_from(EDGES) | st.integers(-(10 ** 6), 10 ** 6).map(float),
                       max_size=30))
def test_float64_arrays_are_written_as_value_by_value(values: list[float]) -> None:
    array = np.asarray(values, np.float64)
    assert write_decimals(array, False) == per_value(array, False)


def test_few_values_are_written_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rapidjson_writer, "FEW", 32)
    with np.errstate(over="ignore"):
        array = np.asarray([*EDGES[:31], 0.5], np.float32)
    assert write_decimals(array[:31], True) == per_value(array[:31], True)
    assert write_decimals(array, True) == per_value(array, True)


@pytest.mark.parametrize(("dtype", "float32"), [(np.float32, True), (np.float64, False)])
def test_random_bit_patterns(dtype: Any, float32: bool) -> None:
    """200,000 finite values from random bits (every exponent, subnormals included), in blocks
    that also hold a NaN (the value-by-value branch) and none."""
    width = np.dtype(dtype).itemsize * 8
    bits = np.random.default_rng(width).integers(0, 2 ** 63, size=200_000, dtype=np.uint64)
    if width == 32:
        bits = bits >> np.uint64(31)
    array = bits.astype(f"uint{width}").view(dtype)
    array = array[np.isfinite(array)]
    assert write_decimals(array, float32) == per_value(array, float32)
    some = np.append(array[:50], np.nan)
    assert write_decimals(some, float32) == per_value(some, float32)


def writer_only(outputs: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> bytes:
    with monkeypatch.context() as patch:
        patch.setattr(tfserving_json, "_single_line_rows", lambda texts, shape: None)
        return tfserving_json.predict_rows(outputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, object])
@pytest.mark.parametrize("shape", [(0,), (1,), (3,), (2, 1), (2, 3), (2, 0), (2, 2, 3), (1, 3, 0, 2),
                                   (3, 1, 1, 1)])
@pytest.mark.parametrize("name", ["y", "y_bytes"])
def test_one_output_rows_are_the_writers(dtype: Any, shape: tuple[int, ...], name: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    size = int(np.prod(shape))
    values = np.random.default_rng(size).normal(size=size) * 1e3
    if dtype is object:
        array = np.array([str(v).encode() for v in values], dtype=object).reshape(shape)
    else:
        array = values.astype(dtype).reshape(shape)
    outputs = {name: array}
    assert tfserving_json.predict_rows(outputs) == writer_only(outputs, monkeypatch)


@PROPERTY
@given(array=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=3)))
def test_float32_outputs_of_any_shape_are_the_writers(array: np.ndarray) -> None:
    with pytest.MonkeyPatch.context() as patch:
        expected = writer_only({"y": array}, patch)
    assert tfserving_json.predict_rows({"y": array}) == expected
