"""batch/records.py's CSV output pieces: rows as csv.DictWriter writes them, the header row, and
the refusal of predictions that have no keys (the job fails saying why); a batch's records
decoded at once, or one by one when some are bad; result lines."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from batch import records


def test_csv_rows_follow_the_header_keys() -> None:
    keys = records.csv_keys({"scores": [0.25, 0.75], "classes": "a,b"})
    assert keys == ["classes", "scores"]
    assert records.csv_row(keys) == "classes,scores\r\n"
    assert records.csv_row({"scores": [0.25, 0.75], "classes": "a,b"}, keys) == \
        '"a,b","[0.25, 0.75]"\r\n'
    assert records.csv_row({"classes": 1}, keys) == "1,\r\n"  # a missing key is empty
    assert records.csv_row([]) == "\r\n"  # no predictions at all: an empty header row
    with pytest.raises(ValueError, match="not in fieldnames"):
        records.csv_row({"other": 1}, keys)


def test_predictions_without_keys_cannot_be_csv() -> None:
    with pytest.raises(ValueError, match="every prediction must be an object of named outputs; "
                                         "this model returned float predictions"):
        records.csv_keys(0.5)


def test_a_batch_decodes_at_once_or_names_its_bad_records() -> None:
    decoder = records.Decoder(cast(Any, SimpleNamespace(framework="SCIKIT_LEARN")), "")
    good = [b"[1.0, 2.5]", b'{"x": [1, NaN]}', b'["\xc3\xa9"]']
    instances, bad = decoder.instances(good)
    assert bad == [] and instances[0] == [1.0, 2.5] and instances[2] == ["\u00e9"]
    assert math.isnan(instances[1]["x"][1])
    instances, bad = decoder.instances([b"[1]", b"{oops", b"\xff", b"[2]", b'["\\ud800"]'])
    assert instances == [[1], [2]]
    assert len(bad) == 3 and all(m.startswith("Failed to parse the instance as JSON: ") for m in bad)
    assert bad[0].endswith(": {oops")
    assert bad[1] == "Failed to parse the instance as JSON: Encountered non UTF-8 code points.: \ufffd"
    assert "Missing low surrogate." in bad[2]  # refused as online prediction refuses it
    assert records.result_lines([{"a": 1.5}, [1, 2]]) == '{"a": 1.5}\n[1, 2]'


def test_result_lines_are_json_dumps_of_each_prediction_whatever_the_types() -> None:
    """Scalar predictions take the one-call way; the bytes must be each one's json.dumps."""
    cases: list[list[Any]] = [
        [0, 1, 1, 0], [0.5, -0.0, 1e20, 1e-07, float("nan"), float("inf"), -float("inf")],
        [True, False, None, 3, 2.5, 10**30], [], [7],
        ["a, b", 1],  # a string holds ", ": not a plain scalar, line by line
        [{"classes": 1, "scores": [0.25, 0.75]}, [1, 2]], [np.float64(0.5), 1.0],
    ]
    for predictions in cases:
        want = "\n".join(json.dumps(p) for p in predictions)
        assert records.result_lines(predictions) == want, predictions
