"""The row format's whole-list conversion (predictors/json_batch.py) gives exactly what the
instance-by-instance path gives: the same array (dtype, shape, bits) or the same error, for
generated instances of every kind (floats of every magnitude, integers past 2**53 and 2**64,
true/false, null, strings, ragged and nested rows), as lists and as wirearray's numeric arrays.
And AI Platform's float32 outputs (predictors/json_values.json_value) come out as the same
doubles through orjson as through numpy's repr."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import PredictionFailed
from predictors import json_batch, json_tensor, json_values

#: Rounds to float32 differently straight (up) and through a double (to the even float32 below).
TIE_BREAKER = 2 ** 53 + 2 ** 29 + 1
PROPERTY = settings(max_examples=400, deadline=None, derandomize=True, database=None)

_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 5e-324, 1e-45, 1.4e-45, 3.4028235e38, 3.4028236e38, 1e308, 2.0 ** 53, 2.0 ** 53 + 2,
     -(2.0 ** 24) - 1, 16777217.0, 0.1, 1 / 3])
_ints = st.integers(-(2 ** 70), 2 ** 70) | st.sampled_from(
    [2 ** 53, 2 ** 53 + 1, -(2 ** 53) - 1, TIE_BREAKER, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, 16777217])
_numbers = _floats | _ints | st.integers(-1000, 1000)
_others = st.booleans() | st.none() | st.text(max_size=2) | st.just({"b64": "AA=="})


def _rows(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Instances: mostly equally long rows (sometimes nested a level deeper, or bare numbers)."""
    def rows_of(width: int) -> st.SearchStrategy[list[Any]]:
        row = st.lists(leaf, min_size=width, max_size=width)
        deep = st.lists(st.lists(leaf, min_size=2, max_size=2), min_size=width, max_size=width)
        return st.lists(row, min_size=1, max_size=6) | st.lists(deep, min_size=1, max_size=3)

    ragged = st.lists(st.lists(leaf, max_size=4) | leaf, min_size=1, max_size=5)
    return st.integers(0, 4).flatmap(rows_of) | st.lists(leaf, min_size=1, max_size=6) | ragged


def _outcome(instances: Any, dtype_name: str, bools: bool) -> tuple[str, Any]:
    try:
        (array,) = json_tensor.rows_to_columns(instances, {"x": dtype_name}, bools).values()
    except PredictionFailed as exc:
        return "error", exc.message
    except (OverflowError, ValueError) as exc:  # what the general path raises is kept too
        return type(exc).__name__, str(exc)
    return "array", (array.dtype.str, array.shape, array.tobytes())


def _reference(instances: Any, dtype_name: str, bools: bool) -> tuple[str, Any]:
    """The instance-by-instance path alone (as before json_batch)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_batch, "stacked", lambda *args: None)
        return _outcome(instances.tolist() if isinstance(instances, np.ndarray) else instances,
                        dtype_name, bools)


@PROPERTY
@given(instances=_rows(_numbers | _others), dtype_name=st.sampled_from(["DT_FLOAT", "DT_DOUBLE"]))
def test_any_instances_convert_as_one_by_one(instances: list[Any], dtype_name: str) -> None:
    assert _outcome(instances, dtype_name, True) == _reference(instances, dtype_name, True)


@PROPERTY
@given(instances=_rows(_numbers | st.none() | st.text(max_size=2)),
       dtype_name=st.sampled_from(["DT_FLOAT", "DT_DOUBLE"]))
def test_instances_known_to_hold_no_bools_convert_as_one_by_one(instances: list[Any],
                                                               dtype_name: str) -> None:
    """TF Serving passes bools=False when its body holds no true/false (numpy's fast path)."""
    assert _outcome(instances, dtype_name, False) == _reference(instances, dtype_name, False)


@PROPERTY
@given(rows=st.integers(1, 5).flatmap(lambda width: st.lists(
    st.lists(_floats | st.integers(-(2 ** 63), 2 ** 63 - 1), min_size=width, max_size=width),
    min_size=1, max_size=6)), dtype_name=st.sampled_from(["DT_FLOAT", "DT_DOUBLE"]))
def test_wirearray_arrays_convert_as_their_lists(rows: list[list[Any]], dtype_name: str) -> None:
    """A large body's array (float64, or int64 when every number is an integer) converts as the
    body's lists do; those differ from array.tolist() only in int/float, which float inputs ignore."""
    array = np.asarray(rows)
    if array.dtype.kind not in "fi":
        return  # wirearray declines these bodies
    assert _outcome(array, dtype_name, True) == _reference(rows, dtype_name, True)


@pytest.mark.parametrize("instances", [
    [[TIE_BREAKER, 1]], [[TIE_BREAKER], [0.5]], [[TIE_BREAKER, 0.5]], [TIE_BREAKER, 1],
    np.asarray([[TIE_BREAKER, 1]]), np.asarray([[-TIE_BREAKER, 1]], np.float64)])
@pytest.mark.parametrize("bools", [True, False])
def test_integers_past_2_53_keep_their_rounding(instances: Any, bools: bool) -> None:
    """An integer's float32 differs straight and through a double: such bodies keep the general
    path's rounding (a double first when the JSON may hold true/false, numpy's per row else)."""
    for dtype_name in ("DT_FLOAT", "DT_DOUBLE"):
        assert _outcome(instances, dtype_name, bools) == _reference(instances, dtype_name, bools)


def test_holds_bool_reads_every_level() -> None:
    assert json_batch.holds_bool([[1.0, [2, [True]]]]) is True
    assert json_batch.holds_bool([[1.0, [2, [3]]], 4]) is False
    assert json_batch.holds_bool([[1.0, None]]) is None
    assert json_batch.holds_bool([{"x": 1.0}]) is None


def _bits(values: Any) -> Any:
    """Nested lists with every float as its IEEE bits (so -0.0 and 0.0 differ)."""
    if isinstance(values, list):
        return [_bits(v) for v in values]
    return struct.pack("<d", values) if isinstance(values, float) else values


@PROPERTY
@given(values=st.lists(st.floats(width=32) | st.sampled_from(
    [0.0, -0.0, 1e-45, 1.17549435e-38, 3.4028235e38, 16777216.0, 0.1, math.inf, math.nan]),
    min_size=0, max_size=40), shape=st.sampled_from(["flat", "column", "scalar"]))
def test_float32_outputs_are_their_shortest_form_as_doubles(values: list[float], shape: str) -> None:
    array: np.ndarray = np.asarray(values, np.float32)
    if shape == "column":
        array = array.reshape(-1, 1)
    elif shape == "scalar":
        array = np.asarray(values[:1] or [0.5], np.float32).reshape(())
    expected = array.astype(str).astype(np.float64).tolist()  # numpy's repr, read as doubles
    assert _bits(json_values.json_value(array, "y")) == _bits(expected)


def test_float32_outputs_at_scale() -> None:
    """A million random float32 bit patterns (subnormals included), finite ones alike."""
    bits = np.random.default_rng(7).integers(0, 2 ** 32, size=1_000_000, dtype=np.uint64)
    array = bits.astype(np.uint32).view(np.float32)
    array = array[np.isfinite(array)]
    got = np.asarray(json_values.json_value(array, "y"), np.float64)
    assert got.view(np.uint64).tolist() == array.astype(str).astype(np.float64).view(np.uint64).tolist()
