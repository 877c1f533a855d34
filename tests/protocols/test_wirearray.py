"""wirearray: large all-number bodies decode to exactly np.asarray(json.loads(body)["instances"]),
or are declined (None) for the general decoder to handle."""

import json
import random
import threading

import numpy as np
import orjson
import pytest

from core import wirejson
from protocols import wirearray


def reference(body: bytes) -> np.ndarray:
    return np.asarray(wirejson.loads(body)["instances"])


def assert_exact(body: bytes) -> np.ndarray:
    got = wirearray.instances_array(body)
    assert got is not None, body[:200]
    want = reference(body)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()  # bit for bit: -0.0 and rounding included
    assert got.flags.writeable
    return got


@pytest.fixture
def any_size(monkeypatch):
    """Lets the small bodies of these cases through the size gate."""
    monkeypatch.setattr(wirearray, "MIN_BYTES", 0)


def test_a_large_float_body_is_the_array_asarray_gives():
    rows = np.random.default_rng(0).normal(size=(2000, 30)).tolist()
    body = orjson.dumps({"instances": rows})
    assert len(body) >= wirearray.MIN_BYTES
    assert assert_exact(body).dtype == np.float64


def test_a_large_integer_body_stays_int64():
    rows = np.random.default_rng(1).integers(-5, 255, size=(3000, 20)).tolist()
    assert assert_exact(orjson.dumps({"instances": rows})).dtype == np.int64


def test_small_bodies_are_left_to_the_general_decoder():
    assert wirearray.instances_array(b'{"instances": [[1.0, 2.0]]}') is None


@pytest.mark.parametrize("instances", [
    "[[1, 2.5], [3, 4]]",                        # integers beside floats: float64
    "[[1e2, -0], [-0.0, 1E-5]]",                 # exponents, both zeros
    "[[9007199254740993, 0.5]]",                 # an integer beyond 2**53 rounded like float()
    "[[9223372036854775807, -9223372036854775808]]",  # int64's ends
    "[[1.5, 9223372036854775808]]",              # past int64 after a float: float64 anyway
    "[[0.1, 0.2, 0.30000000000000004, 1.7976931348623157e308, 5e-324, 2.2250738585072014e-308]]",
    "[[123456789012345678901234567890.123456789, 0.1000000000000000055511151231257827]]",
    " [ [ 1.5 ,\n 2 ] ,\t[ 3 , 4.25 ] ] ",        # whitespace anywhere
])
def test_number_forms_match_the_reference_exactly(any_size, instances):
    assert_exact(f'{{"instances": {instances}}}'.encode())


@pytest.mark.parametrize("body", [
    b'\xef\xbb\xbf{"instances": [[1.5, 2]]}',      # a UTF-8 byte order mark, as json.loads allows
    b'{"\\u0069nstances": [[1.5, 2]]}',             # an escaped key is still "instances"
])
def test_spellings_the_general_decoder_accepts_too(any_size, body):
    assert_exact(body)


def test_random_decimal_spellings_round_like_the_reference(any_size):
    rnd = random.Random(7)

    def number() -> str:
        # Integers stay within int64 (simdjson declines larger ones) and magnitudes within
        # float64 (the general decoder turns overflow into inf, simdjson declines it).
        fraction = rnd.random() < 0.8
        digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 25 if fraction else 18)))
        text = digits.lstrip("0") or "0"
        if fraction:
            text += "." + "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 25)))
        if rnd.random() < 0.3:
            text += rnd.choice("eE") + rnd.choice(["", "+", "-"]) + str(rnd.randint(0, 280))
        return rnd.choice(["", "-"]) + text

    for _ in range(5):
        rows = ",".join("[" + ",".join(number() for _ in range(10)) + "]" for _ in range(300))
        assert_exact(f'{{"instances": [{rows}]}}'.encode())


@pytest.mark.parametrize("body", [
    '{"instances": [[1.0, null]]}',                 # null: XGBoost's missing value
    '{"instances": [[1.0, NaN]]}',                  # the NaN token
    '{"instances": [[1.0, Infinity]]}',
    '{"instances": [[1.0, 1e400]]}',                # overflows to inf in the general decoder
    '{"instances": [[true, 1.0]]}',
    '{"instances": [["1.5", 1.0]]}',
    '{"instances": [{"a": 1.0}]}',
    '{"instances": [[1.0, 2.0], [3.0]]}',           # ragged
    '{"instances": [[1.0, [2.0]], [3.0, 4.0]]}',    # a nested list as long as a number
    '{"instances": [[1.0, 2.0], [[3.0, 4.0, 5.0]], 7.0]}',  # counts agree, shape does not
    '{"instances": [[[5.0]], 7.0]}',
    '{"instances": [1.0, 2.0]}',                    # 1-D
    '{"instances": [[], []]}',
    '{"instances": []}',
    '{"instances": 3}',
    '{"instances": [[1.0]], "signature_name": "x"}',  # parameters
    '{"instances": [[1.0]], "instances": [[2.0]]}',   # duplicate key: the last one wins
    '{"instances": [[1.0]], "instan\\u0063es": [[2.0]]}',
    '{"instance": [[1.0]]}',
    '[[1.0, 2.0]]',
    '{"instances": [[9223372036854775808]]}',       # alone past int64: numpy makes uint64
    '{"instances": [[9223372036854775808, 1]]}',    # ... and float64 beside a small integer
    '{"instances": [[18446744073709551616, 1.5]]}',  # past uint64: an object array
    '{"instances": [[1.0, 2.0]]',                   # truncated
    '{"instances": [[1.0, 2.0]]} x',
    '{"instances": [[01.0, 2.0]]}',
    '{"instances": [[.5, 2.0]]}',
    '{"instances": [[+1, 2.0]]}',
    '{"instances": [[1.0,, 2.0]]}',
    '\xff{"instances": [[1.0]]}',
    '{"instances": ' + '[' * 3000 + ']' * 3000 + '}',  # deeper than simdjson's limit
    '{"instances": [[1.0]]}\x00',
])
def test_everything_else_is_declined(any_size, body):
    assert wirearray.instances_array(body.encode("latin-1")) is None


def test_a_declined_body_does_not_spoil_the_next_one(any_size):
    assert wirearray.instances_array(b'{"instances": [[1.0, "x"]]}') is None
    assert wirearray.instances_array(b'{"instances": [[1.0, 2.0]') is None
    assert_exact(b'{"instances": [[1.0, 2.0]]}')


def test_a_parser_that_read_a_body_above_the_keep_limit_is_not_kept(monkeypatch):
    body = orjson.dumps({"instances": [[1.5, 2.5]] * 8000})
    monkeypatch.setattr(wirearray, "_spare", [])
    monkeypatch.setattr(wirearray, "KEEP_BYTES", len(body) - 1)
    assert_exact(body)
    assert wirearray._spare == []
    monkeypatch.setattr(wirearray, "KEEP_BYTES", len(body))
    assert_exact(body)
    assert len(wirearray._spare) == 1


def test_concurrent_decodes_each_get_their_own_array():
    bodies = [orjson.dumps({"instances": np.full((1500, 12), float(i) + 0.5).tolist()})
              for i in range(8)]
    errors: list[str] = []

    def work(i: int) -> None:
        for _ in range(10):
            got = wirearray.instances_array(bodies[i])
            if got is None or not (got == i + 0.5).all() or got.shape != (1500, 12):
                errors.append(f"thread {i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("instances", [
    "[[1.5, 2.25], [3.0, -0.0]]",     # every number with a point: tolist() is exact
    "[[1, 2], [3, -4]]",              # every number an integer
    "[[1, 2.5], [3, 4]]",             # mixed: decoded again so 1 stays an int
    "[[1e-05, 2.5]]",                 # a float without a point
])
def test_rows_are_what_the_general_decoder_gives(any_size, instances):
    body = f'{{"instances": {instances}}}'.encode()
    array = wirearray.instances_array(body)
    assert array is not None
    rows = wirearray.rows(body, array)
    want = json.loads(body)["instances"]
    assert rows == want
    assert [[type(v) for v in row] for row in rows] == [[type(v) for v in row] for row in want]
