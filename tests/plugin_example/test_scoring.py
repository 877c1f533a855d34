"""Tests of scoring.py against mlemu, through pytest-mlemu's public fixtures only."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError
from scoring import score

MODEL = "projects/shop/models/churn"
ROWS = [[1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0]]


def test_scores_rows(mlemu, ml_v1):
    assert score(ml_v1, MODEL, ROWS) == [1, 0]
    [call] = mlemu.assert_requests(1, method="predict", model="churn")
    assert call["instanceCount"] == 2 and call["status"] == 200


def test_rides_out_two_quota_errors(mlemu, ml_v1):
    mlemu.quota_exhausted(times=2, method="predict", model="churn")
    assert score(ml_v1, MODEL, ROWS) == [1, 0]
    calls = mlemu.assert_requests(3, method="predict")
    assert [c["status"] for c in calls] == [429, 429, 200]
    assert [rule["hits"] for rule in mlemu.faults()] == [2]


def test_gives_up_on_a_permanent_error(mlemu, ml_v1):
    mlemu.fault(match={"model": "churn"}, error={"status": "PERMISSION_DENIED",
                                                 "message": "Not for you."})
    with pytest.raises(HttpError) as caught:
        score(ml_v1, MODEL, ROWS)
    assert caught.value.resp.status == 403
    mlemu.assert_requests(1, method="predict")  # 403 is not retried


def test_each_test_starts_clean(mlemu, ml_v1):
    """The rules and calls of the tests above are gone: `mlemu` reset the server."""
    assert mlemu.faults() == [] and mlemu.requests() == []
    models = ml_v1.projects().models().list(parent="projects/shop").execute()["models"]
    assert [m["name"] for m in models] == [MODEL]


def test_a_new_model_does_not_outlive_its_test(mlemu, ml_v1):
    ml_v1.projects().models().create(parent="projects/shop", body={"name": "scratch"}).execute()
    mlemu.reset(project="shop")
    models = ml_v1.projects().models().list(parent="projects/shop").execute()["models"]
    assert [m["name"] for m in models] == [MODEL]
