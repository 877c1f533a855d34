"""The :predict fast path (protocols.aiplatform.PredictFastPath) answers exactly as the Flask view.

Every request below is sent twice: through the app as gunicorn runs it (fast path in front) and
straight to Flask's own WSGI callable (the fast path bypassed). Status, content type, headers that
matter and body bytes must agree, and the fast path must have taken the requests it claims.
"""

import json

import pytest
from werkzeug.test import Client, EnvironBuilder

from tests.conftest import fast_path_of
from tests.kit import modelkit

ROW = [1.0, 2.0, 0.5, -1.0]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("models")
    modelkit.sklearn_model(root / "v1", "logreg", seed=0)
    modelkit.xgboost_model(root / "xgb")
    config = modelkit.bootstrap_file(root / "mlemu.yaml", {
        "m": {"versions": {"v1": {"deploymentUri": "v1"}}},
        "xgb": {"versions": {"v1": {"deploymentUri": "xgb", "framework": "XGBOOST"}}},
        "empty": {},
    })
    settings = Settings(state_dir=tmp_path_factory.mktemp("state"), config_file=config,
                        max_request_bytes=4096)
    return create_app(settings, warm=False)


def both(app, path, data, method="POST", headers=None):
    """(fast-path answer, Flask answer, whether the fast path took the request)."""
    kwargs = {"method": method, "data": data, "content_type": "application/json",
              "headers": headers or {}}
    fast = Client(app).open(path, **kwargs)
    flask_only = Client(fast_path_of(app).app).open(path, **kwargs)
    taken = fast_path_of(app).route(EnvironBuilder(path, **kwargs).get_environ()) is not None
    return fast, flask_only, taken


def same(a, b):
    assert (a.status_code, a.content_type, a.get_data()) == (b.status_code, b.content_type,
                                                             b.get_data())
    assert a.headers.get("WWW-Authenticate") == b.headers.get("WWW-Authenticate")


@pytest.mark.parametrize("path, body", [
    ("/v1/projects/p/models/m:predict", {"instances": [ROW, ROW]}),
    ("/v1/projects/p/models/m/versions/v1:predict", {"instances": [ROW]}),
    ("/v1/projects/p/models/m:predict?alt=json", {"instances": [ROW]}),
    ("/v1/projects/p/models/xgb:predict", {"instances": [ROW, [1.0, None, 2.0, 3.0]]}),
    ("/v1/projects/p/models/xgb:predict", '{"instances": [[1.0, NaN, 2.0, 3.0]]}'),
    ("/v1/projects/p/models/nope:predict", {"instances": [ROW]}),
    ("/v1/projects/p/models/m/versions/v9:predict", {"instances": [ROW]}),
    ("/v1/projects/p/models/empty:predict", {"instances": [ROW]}),
    ("/v1/projects/p/models/m:predict", "{not json"),
    ("/v1/projects/p/models/m:predict", ""),
    ("/v1/projects/p/models/m:predict", [ROW]),
    ("/v1/projects/p/models/m:predict", {"rows": [ROW]}),
    ("/v1/projects/p/models/m:predict", {"instances": []}),
    ("/v1/projects/p/models/m:predict", {"instances": [[1.0, 2.0]]}),  # wrong feature count
    ("/v1/projects/p/models/m:predict", {"instances": [ROW], "threshold": 0.7}),
    ("/v1/projects/p/models/m:predict", {"instances": [ROW] * 200}),  # over max_request_bytes
    ("/v1/projects/p/models/m:predict", "[" * 5000),
])
def test_fast_path_answers_like_flask(app, path, body):
    data = body if isinstance(body, str) else json.dumps(body)
    fast, flask_only, taken = both(app, path, data)
    assert taken or not data  # werkzeug's test client sends no Content-Length for an empty body
    same(fast, flask_only)


def test_a_plain_request_is_served_by_the_fast_path_with_the_right_answer(app):
    fast, _, taken = both(app, "/v1/projects/p/models/m:predict", json.dumps({"instances": [ROW]}))
    assert taken and fast.status_code == 200 and fast.json == {"predictions": [1]}
    assert fast.headers["Content-Length"] == str(len(fast.get_data()))


@pytest.mark.parametrize("path, method", [
    ("/v1/projects/p/models/m:predict?fields=predictions", "POST"),  # partial response: Flask
    ("/v1/projects/p/models/m:predict?prettyPrint=true", "POST"),
    ("/v1/projects/p/models/m:predict?alt=proto", "POST"),
    ("/v1/projects/p/models/m:predict", "GET"),  # 405 from Flask's router
    ("/v1/projects/p/models/m:predict", "PUT"),
    ("/v1/projects/p/models/a.b:predict", "POST"),  # names outside [\w-]: Flask's router decides
    ("/v1/projects/p/models/m:explain", "POST"),
])
def test_other_requests_go_to_flask_unchanged(app, path, method):
    data = json.dumps({"instances": [ROW]})
    fast, flask_only, taken = both(app, path, data, method=method)
    assert not taken
    same(fast, flask_only)


def test_partial_response_and_pretty_print_still_work(app):
    client = Client(app)
    answer = client.post("/v1/projects/p/models/m:predict?fields=predictions&prettyPrint=true",
                         data=json.dumps({"instances": [ROW]}), content_type="application/json")
    assert answer.status_code == 200 and json.loads(answer.get_data()) == {"predictions": [1]}
    assert b"\n" in answer.get_data()


def test_a_chunked_body_goes_to_flask(app):
    environ = EnvironBuilder("/v1/projects/p/models/m:predict", method="POST",
                             data=json.dumps({"instances": [ROW]})).get_environ()
    del environ["CONTENT_LENGTH"]
    assert fast_path_of(app).route(environ) is None


def test_iam_refusals_match(tmp_path):
    """With IAM enforced, an anonymous caller gets the same 401 (and WWW-Authenticate) both ways."""
    from app import create_app
    from core.settings import Settings

    modelkit.sklearn_model(tmp_path / "v1", "logreg", seed=0)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml",
                                     {"m": {"versions": {"v1": {"deploymentUri": "v1"}}}})
    iam = tmp_path / "iam.yaml"
    iam.write_text("staticTokens:\n  t0k: user:alice@example.com\n")
    app = create_app(Settings(state_dir=tmp_path / "state", config_file=config,
                              iam_mode="enforce", iam_config=iam), warm=False)
    data = json.dumps({"instances": [ROW]})
    anonymous = both(app, "/v1/projects/p/models/m:predict", data)
    assert anonymous[2] and anonymous[0].status_code == 401
    same(anonymous[0], anonymous[1])
    denied = both(app, "/v1/projects/p/models/m:predict", data,
                  headers={"Authorization": "Bearer t0k"})
    assert denied[0].status_code == 403
    same(denied[0], denied[1])
