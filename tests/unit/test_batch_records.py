"""batch/records.py's CSV output pieces: rows as csv.DictWriter writes them, the header row, and
the refusal of predictions that have no keys (the job fails saying why)."""

from __future__ import annotations

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
