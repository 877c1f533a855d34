"""Strings that are not Unicode (issue 17, item 6): a lone UTF-16 surrogate escape or bytes that
are not UTF-8 are refused at the door with Google's JSON parser's words, nothing is stored, and
rows stored that way before the check existed still read."""

import pytest

from registry.resources import Model, Operation

P = "/v1/projects/p"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def client(make_app):
    client = make_app()
    assert client.post(f"{P}/models", json={"name": "m"}).status_code == 200
    return client


def post(client, path, raw: bytes, method="post"):
    return getattr(client, method)(path, data=raw, headers=JSON)


def refused(answer, message):
    assert answer.status_code == 400, answer.data
    error = answer.get_json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == f"Invalid JSON payload received. {message}"


@pytest.mark.parametrize("raw, message", [
    (b'{"name": "p1", "labels": {"\\ud800": "x"}}', "Missing low surrogate."),
    (b'{"name": "p1", "labels": {"k": "\\udc00"}}', "Invalid unicode code point."),
    (b'{"name": "p1", "description": "a\\uDBFFb"}', "Missing low surrogate."),
    (b'{"name": "p1", "description": "\xff"}', "Encountered non UTF-8 code points."),
    (b'{"name": "p1", "description": "\xed\xa0\x80"}', "Encountered non UTF-8 code points."),
    (b'{"name": "p1", "description": NaN, "labels": {"\\ud800": "x"}}', "Missing low surrogate."),
])
def test_models_create_refuses_strings_that_are_not_unicode(client, raw, message):
    refused(post(client, f"{P}/models", raw), message)
    listing = client.get(f"{P}/models")
    assert listing.status_code == 200
    assert [m["name"] for m in listing.get_json()["models"]] == ["projects/p/models/m"]


def test_patch_version_create_and_set_iam_policy_refuse_them_too(client):
    refused(post(client, f"{P}/models/m?updateMask=description", b'{"description": "\\udbff"}',
                 "patch"), "Missing low surrogate.")
    refused(post(client, f"{P}/models/m/versions", b'{"name": "v1", "deploymentUri": "/x\\ud800"}'),
            "Missing low surrogate.")
    refused(post(client, f"{P}/models/m:setIamPolicy",
                 b'{"policy": {"bindings": [{"role": "roles/ml.viewer", "members": ["user:\\udfff"]}]}}'),
            "Invalid unicode code point.")
    assert client.get(f"{P}/operations").status_code == 200
    assert "description" not in client.get(f"{P}/models/m").get_json()


def test_surrogate_pairs_are_ordinary_characters(client):
    answer = post(client, f"{P}/models", b'{"name": "e", "description": "\\ud83d\\ude00"}')
    assert answer.status_code == 200
    assert client.get(f"{P}/models/e").get_json()["description"] == "\U0001F600"


def test_prediction_bodies_are_checked_the_same_way(client):
    answer = post(client, f"{P}/models/m:predict", b'{"instances": ["\\ud800"]}')
    refused(answer, "Missing low surrogate.")
    # TF Serving answers in its own parser's (rapidjson's) words.
    answer = post(client, "/v1/models/m:predict", b'{"instances": ["\\ud800"]}')
    assert answer.status_code == 400
    assert "The surrogate pair in string is invalid." in answer.get_json()["error"]


def test_rows_stored_before_the_check_still_read(client):
    # A model and an operation written with lone surrogates, as the store kept them before.
    store = client.emu.store
    store.put_model(Model.from_json({"labels": {"\ud800": "x"}, "description": "\udbff"},
                                    "projects/p/models/poisoned"))
    op = Operation(name="projects/p/operations/op1", done=True,
                   metadata={"modelName": "projects/p/models/poisoned", "description": "\udbff"})
    store.put_operation(op)
    for path in (f"{P}/models", f"{P}/models/poisoned", f"{P}/operations",
                 f"{P}/operations/op1"):
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.data)
    body = client.get(f"{P}/models/poisoned").data
    assert b'"\\ud800"' in body and b'"\\udbff"' in body  # kept as stored, escaped on the wire
