"""The row format's one-input float tensor in a single numpy conversion, where that is exact.

predictors/json_tensor.py reads TF Serving's row format instance by instance, as
tensorflow_serving/util/json_tensor.cc does: each instance is checked and converted on its own
(in Python, value by value, when the JSON may hold true/false), then the instances are stacked.
For the common request (one DT_FLOAT or DT_DOUBLE input, every instance a list of numbers of one
shape) that is a Python call per number, many times slower than numpy's conversion of the whole
list (bench/NOTES.md, "Large requests"). `stacked` gives that whole-list conversion where it is certainly
the same array, bit for bit, and None everywhere else (the caller then takes the instance by
instance path, whose checks and messages are the reference):

- every instance must be a list (or number) with no dict anywhere: named inputs and b64 objects
  take the general path;
- numpy must make a float or integer array of it: ragged instances raise, strings or null make
  other dtypes;
- no true/false may hide in it (numpy reads them as 1 and 0 where json_tensor.cc refuses them):
  the caller says when the JSON cannot hold any, otherwise the values are scanned for them;
- every magnitude must be below 2**53. json_tensor.py converts a number as a double first
  (float(value); whole rows of integers through numpy's integer cast when the JSON holds no
  true/false), and below 2**53 every integer is exact as a double, so all these routes round
  once, to the same float32. Above it a double rounding could differ: those bodies take the
  instance-by-instance path and keep its exact semantics.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

#: The float dtypes this path converts to (json_tensor.NUMPY_TYPES' float entries).
FLOAT_TYPES = {"DT_FLOAT": np.float32, "DT_DOUBLE": np.float64}
#: Integers up to this magnitude are exact as doubles (float64 has a 53-bit significand).
EXACT_INTEGERS = 2.0 ** 53
_NUMBERS = frozenset({float, int})


def holds_bool(instances: list[Any]) -> bool | None:
    """Whether `instances` (a list) holds true/false; None if it holds anything but lists and
    numbers (a dict, a string, null: not for this path either way)."""
    kinds = set(map(type, instances))
    while list in kinds:  # one level deeper: every element of every list
        kinds.discard(list)
        nested = [item for item in instances if type(item) is list]
        instances = list(chain.from_iterable(nested))
        kinds |= set(map(type, instances))
    if bool in kinds:
        return True
    return False if kinds <= _NUMBERS else None


def stacked(instances: Any, dtype_name: str, bools: bool = True) -> np.ndarray | None:
    """The batched tensor of one unnamed input (see the module docstring), or None.

    `instances` is the `instances` list, or a 2-D numeric array decoded straight from the body
    (wirearray.py: numbers only). `bools=False` promises the JSON holds no true/false.
    """
    target = FLOAT_TYPES.get(dtype_name)
    if target is None:
        return None
    if isinstance(instances, np.ndarray):
        array = instances
    else:
        if not instances or isinstance(instances[0], dict):
            return None
        if bools and holds_bool(instances) is not False:
            return None
        try:
            array = np.asarray(instances)
        except (ValueError, TypeError, OverflowError):
            return None  # ragged, or an integer beyond a double: the general path says what
    if array.dtype.kind not in "fiu" or array.ndim < 1:
        return None
    if array.size and not -EXACT_INTEGERS < array.min() <= array.max() < EXACT_INTEGERS:
        return None  # (NaN fails the test too: such values keep the general path)
    with np.errstate(over="ignore"):  # static_cast<float>: a double beyond float range is inf
        return array.astype(target)
