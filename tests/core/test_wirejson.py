import math

import numpy as np
import pytest

from core import wirejson


def test_loads_accepts_non_standard_tokens():
    body = wirejson.loads(b'{"instances": [[0.0, 1.1, NaN], [Infinity, -Infinity, null]]}')
    row0, row1 = body["instances"]
    assert row0[:2] == [0.0, 1.1] and math.isnan(row0[2])
    assert row1[0] == math.inf and row1[1] == -math.inf and row1[2] is None


@pytest.mark.parametrize("bad", [b"{", b'{"a": }', b"\xff\xfe", b'{"a": NaNa}'])
def test_loads_rejects_malformed(bad):
    with pytest.raises(wirejson.DecodeError):
        wirejson.loads(bad)


def test_dumps_keeps_nan_apart_from_null():
    out = wirejson.dumps({"p": [1.5, float("nan"), None, float("inf"), -float("inf")]})
    assert out == b'{"p":[1.5,NaN,null,Infinity,-Infinity]}'


def test_dumps_fast_path_and_numpy():
    assert wirejson.dumps({"p": np.array([1, 2])}) == b'{"p":[1,2]}'
    assert wirejson.dumps({"p": [np.float32(0.5)]}) == b'{"p":[0.5]}'
    assert wirejson.dumps({"p": np.array([np.nan])}) == b'{"p":[NaN]}'


def test_dumps_pretty():
    assert wirejson.dumps({"a": [1]}, pretty=True).decode() == '{\n  "a": [\n    1\n  ]\n}'
