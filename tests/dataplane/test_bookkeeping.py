"""The data plane's bookkeeping for answers a model yields item by item: a custom predictor
that returns a generator keeps streaming over grps (one message per item) while its version's
requestLoggingConfig still logs the request, with every item, once the stream was sent; ml v1
`:predict` lists the same generator and logs it too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from observability import request_log
from tests.kit import modelkit

STREAM_SOURCE = '''
class WordsPredictor:
    """'stream: a b' yields its words one by one; anything else, upper-cased."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        first = instances[0]
        if first.startswith("stream:"):
            return (word for word in first[len("stream:"):].split())
        return [first.upper()]
'''
VERSION = "projects/mlemu/models/words/versions/v1"


@pytest.fixture
def client(make_app: Any, tmp_path: Path) -> Any:
    package = modelkit.custom_package(tmp_path / "pkg", "words_predictor", STREAM_SOURCE,
                                      kind="dir")
    config = modelkit.bootstrap_file(tmp_path / "bootstrap.yaml", {"words": {"versions": {"v1": {
        "deploymentUri": str(modelkit.custom_model_dir(tmp_path / "words")),
        "predictionClass": "words_predictor.WordsPredictor", "packageUris": [str(package)],
        "requestLoggingConfig": {"samplingPercentage": 1.0, "bigqueryTableName": "p.d.t"}}}}},
        project="mlemu")
    return make_app(config, default_project="mlemu", request_log_sink="store")


def logged(client: Any) -> list[tuple[Any, Any]]:
    client.emu.request_log.drain()
    return [(json.loads(r["raw_data"]), json.loads(r["raw_prediction"]))
            for r in request_log.read(client.emu.store, [VERSION], 0)]


def test_a_grps_stream_stays_a_stream_and_is_logged_whole(client: Any) -> None:
    answer = client.post("/grps/v1/infer/predict?model=words-v1&streaming=true",
                         json={"str_data": "stream: one two three"})
    assert answer.status_code == 200
    chunks = [json.loads(chunk) for chunk in answer.response]
    assert [c["str_data"] for c in chunks] == ["one", "two", "three"]
    assert logged(client) == [({"instances": ["stream: one two three"]},
                               {"predictions": ["one", "two", "three"]})]


def test_ml_v1_lists_a_generator_and_logs_it(client: Any) -> None:
    answer = client.post("/v1/projects/mlemu/models/words/versions/v1:predict",
                         json={"instances": ["stream: a b"]})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.get_json() == {"predictions": ["a", "b"]}
    assert logged(client) == [({"instances": ["stream: a b"]}, {"predictions": ["a", "b"]})]


def test_stamping_last_use_time_keeps_the_serving_cache(make_app: Any, tmp_path: Path) -> None:
    # lastUseTime is written quietly: a thousand versions each stamped once a minute by each
    # worker otherwise changed the store's change token every few milliseconds, and every
    # change drops the cached serving versions (registry/lookup.py) and makes the next prune
    # read every held version.
    from core.payloads import ModelRef
    from registry import lookup

    modelkit.sklearn_model(tmp_path / "sk", "linreg", features=2)
    config = modelkit.bootstrap_file(tmp_path / "b.yaml", {"sk": {"versions": {"v1": {
        "deploymentUri": str(tmp_path / "sk")}}}}, project="mlemu")
    client = make_app(config, default_project="mlemu")
    store, url = client.emu.store, "/v1/projects/mlemu/models/sk/versions/v1"
    assert client.post(f"{url}:predict", json={"instances": [[1.0, 2.0]]}).status_code == 200
    cached = lookup.serving_version(store, ModelRef("mlemu", "sk", "v1"))
    token = store.change_token()
    client.emu.last_use.clear()  # the next prediction stamps again
    assert client.post(f"{url}:predict", json={"instances": [[1.0, 2.0]]}).status_code == 200
    assert client.emu.last_use  # it did stamp...
    assert client.get(url).get_json()["lastUseTime"]  # ...the stored version...
    assert store.change_token() == token  # ...without a change serving readers must see
    assert lookup.serving_version(store, ModelRef("mlemu", "sk", "v1")) is cached
