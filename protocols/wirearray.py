"""Large `{"instances": [[number, ...], ...]}` request bodies decoded straight into a numpy array.

For a 10,000 x 30 body, orjson builds 300,000 Python floats and np.asarray walks them again:
most of such a request's time (the model call is a small part of it; bench/RESULTS.md, "Big
requests"). simdjson (pysimdjson) parses the document into its own tape and copies the numbers
out into a buffer without making a Python object per number, in a fraction of that time.

`instances_array` is exact or declines: it returns the array `np.asarray(json.loads(data)
["instances"])` would give (same shape, dtype and values, bit for bit), or None, and the caller
then takes the general path (wirejson), which also gives the error for a bad body. It declines
everything but the plain case: a top-level object whose only key is `instances`, holding a
non-empty list of equally long, non-empty lists of JSON numbers that fit the array's dtype.
So `null`, `NaN`, booleans, strings, ragged or deeper rows, extra or duplicate keys and
malformed JSON all take the general path, whose semantics are the reference. TF Serving's
columnar bodies (`{"inputs": [[number, ...], ...]}`) are read the same way (`keyed_array`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import simdjson

from core import wirejson

#: Bodies from this size on are tried (smaller ones decode in microseconds either way, and their
#: instances stay lists, which concurrent requests' batching merges).
MIN_BYTES = 64 * 1024

_OPEN = ord("[")
_POINT = ord(".")

#: One parser kept for reuse: parsing into a parser's existing buffers saves faulting in fresh
#: pages for each large body; concurrent calls make their own.
_spare: list[simdjson.Parser] = []
#: A parser keeps buffers of about twice the largest body it parsed (13 MB after 6 MB), so one
#: that parsed a body larger than this is dropped rather than kept (MLEMU_MAX_REQUEST_BYTES may
#: be set far above AI Platform's 1.5 MB).
KEEP_BYTES = 8 << 20


def instances_array(data: bytes) -> np.ndarray | None:
    """The 2-D array of a plain all-number `instances` body, or None (see the module docstring)."""
    found = keyed_array(data, ("instances",))
    return None if found is None else found[1]


def keyed_array(data: bytes, keys: tuple[str, ...]) -> tuple[str, np.ndarray] | None:
    """The key and 2-D array of a plain all-number body whose one key is one of `keys`, or None."""
    if len(data) < MIN_BYTES:
        return None
    try:
        parser = _spare.pop()
    except IndexError:
        parser = simdjson.Parser()
    try:
        found = _decode(parser, data, keys)
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError):
        return None  # the parser may still be referenced by the error's frames: not reused
    if not _spare and len(data) <= KEEP_BYTES:
        _spare.append(parser)
    return found


def _decode(parser: simdjson.Parser, data: bytes, keys: tuple[str, ...]) -> tuple[str, np.ndarray] | None:
    doc = parser.parse(data)
    if type(doc) is not simdjson.Object or len(doc) != 1:
        return None  # other keys are predict parameters; duplicate keys: the last one wins
    (key,) = doc.keys()
    if key not in keys:
        return None
    rows = doc[key]
    if type(rows) is not simdjson.Array or not len(rows):
        return None
    width = len(rows[0])
    for row in rows:
        if type(row) is not simdjson.Array or len(row) != width:
            return None
    # Every row is a list, and the body holds no string but the key, so any further "[" is a
    # list nested in a row, which as_buffer would flatten silently. (numpy counts the bytes
    # about four times as fast as bytes.count.)
    if not width or np.count_nonzero(np.frombuffer(data, np.uint8) == _OPEN) != len(rows) + 1:
        return None
    try:
        flat = np.frombuffer(rows.as_buffer(of_type="i"), dtype=np.int64)  # all integers
    except TypeError:
        # Not all integers, so a float: np.asarray makes float64 of any mix with integers.
        # (An integer past int64 seen first raises ValueError: np.asarray would make uint64,
        # float64 or object depending on the others, so that body is declined.)
        flat = np.frombuffer(rows.as_buffer(of_type="d"), dtype=np.float64)
    return key, flat.reshape(len(rows), width)


def rows(data: bytes, array: np.ndarray) -> list[Any]:
    """The instances of `data` as the general decoder gives them, for predictors that take lists.

    `array.tolist()` is exactly that when the Python types match: every number an integer
    (int64), or every number written with a decimal point (float64; a body holds no other "."
    since its only string is the key). A float64 array from a body that also writes integers
    (`1` beside `1.5`) would turn those into floats, so such a body is decoded again.
    """
    if array.dtype.kind == "i":
        return array.tolist()  # type: ignore[no-any-return]
    if np.count_nonzero(np.frombuffer(data, np.uint8) == _POINT) == array.size:
        return array.tolist()  # type: ignore[no-any-return]
    return wirejson.loads(data)["instances"]  # type: ignore[no-any-return]
