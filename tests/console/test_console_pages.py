"""The console's pages over an in-process app (Flask's test client): what each page shows, that
every name is escaped, "try it", CSRF, sign-in under IAM enforce, the setting that turns it off,
and the notices shown while the emulator controls or the Vertex AI API are absent."""

from __future__ import annotations

import json

import pytest

from tests.console.consolekit import (
    ADMIN_TOKEN,
    NOBODY_TOKEN,
    PROJECT,
    form,
    iam_config,
    iris_bootstrap,
    without_routes,
)

SCRIPT = "<script>alert('owned')</script>"


@pytest.fixture
def client(make_app, tmp_path):
    return make_app(iris_bootstrap(tmp_path), default_project=PROJECT)


def test_overview_lists_models_versions_and_escapes_every_label(client):
    created = client.post(f"/v1/projects/{PROJECT}/models", json={
        "name": "evil", "description": '<img src=x onerror="alert(1)">',
        "labels": {"team": SCRIPT, SCRIPT: "key"}})
    assert created.status_code == 200, created.data
    page = client.get("/console/")
    assert page.status_code == 200
    text = page.data.decode()
    assert "iris" in text and ">v1<" in text and "READY" in text
    assert "evil" in text
    assert SCRIPT not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in text
    model_page = client.get(f"/console/projects/{PROJECT}/models/evil").data.decode()
    assert SCRIPT not in model_page and "&lt;script&gt;" in model_page
    assert "&lt;img src=x" in model_page


def test_model_and_version_pages(client):
    model = client.get(f"/console/projects/{PROJECT}/models/iris")
    assert model.status_code == 200 and b"/console/projects/demo/models/iris/versions/v1" in model.data
    version = client.get(f"/console/projects/{PROJECT}/models/iris/versions/v1")
    text = version.data.decode()
    assert version.status_code == 200 and "SCIKIT_LEARN" in text and 'name="body"' in text
    missing = client.get(f"/console/projects/{PROJECT}/models/nope")
    assert missing.status_code == 404 and b"nope" in missing.data and b"<!DOCTYPE html>" in missing.data


def test_try_it_predicts_and_explains_with_the_api_answer(client):
    url = f"/console/projects/{PROJECT}/models/iris/versions/v1"
    page = client.get(url).data.decode()
    instances = [[1.0, 0.5, 0.0, 0.0], [-2.0, -1.0, 0.0, 0.0]]
    body = json.dumps({"instances": instances})
    sent = client.post(url + "/try", data=form(page, method="predict", body=body))
    text = sent.data.decode()
    assert sent.status_code == 200
    expected = client.post(f"/v1/projects/{PROJECT}/models/iris/versions/v1:predict",
                           json={"instances": instances}).get_json()
    assert expected == {"predictions": [1, 0]}
    assert 'id="result-status">200<' in text
    answer = text.split('<pre id="answer" class="ok">', 1)[1].split("</pre>", 1)[0]
    assert json.loads(answer.replace("&#34;", '"').replace("&quot;", '"')) == expected
    assert "curl -sS -X POST" in text and "versions/v1:predict" in text
    assert "ml.projects().predict(name=" in text and "AnonymousCredentials()" in text
    # explain without an explanationConfig: the API's own refusal, shown as it answered
    refused = client.post(url + "/try", data=form(page, method="explain", body=body)).data.decode()
    assert 'id="result-status">400<' in refused and "explanationConfig" in refused


def test_try_it_shows_a_body_that_is_not_json_as_such(client):
    url = f"/console/projects/{PROJECT}/models/iris/versions/v1"
    page = client.get(url).data.decode()
    sent = client.post(url + "/try", data=form(page, method="predict", body="{nope " + SCRIPT))
    text = sent.data.decode()
    assert sent.status_code == 200 and "The body is not JSON" in text
    assert SCRIPT not in text


def test_state_changing_forms_need_the_csrf_token(client):
    url = f"/console/projects/{PROJECT}/models/iris/versions/v1"
    client.get(url)
    for data in ({"method": "predict", "body": "{}"}, {"csrf": "forged", "body": "{}"}):
        refused = client.post(url + "/try", data=data)
        assert refused.status_code == 403 and b"CSRF" in refused.data
    assert client.post("/console/controls/reset", data={}).status_code == 403


def test_cookies_are_httponly_and_samesite_strict(client):
    response = client.get("/console/")
    cookie = response.headers["Set-Cookie"]
    assert "mlemu_console_csrf=" in cookie and "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie and "Path=/console/" in cookie
    assert response.headers["Cache-Control"] == "no-store"
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_a_body_over_the_bound_is_refused(client):
    url = f"/console/projects/{PROJECT}/models/iris/versions/v1"
    page = client.get(url).data.decode()
    big = client.post(url + "/try", data=form(page, body="[" + "1," * 600_000 + "1]"))
    assert big.status_code == 413 and b"<!DOCTYPE html>" in big.data


def test_enforce_needs_a_token_kept_in_an_httponly_strict_cookie(make_app, tmp_path):
    client = make_app(iris_bootstrap(tmp_path), default_project=PROJECT, iam_mode="enforce",
                      iam_config=iam_config(tmp_path))
    first = client.get("/console/")
    assert first.status_code == 303 and "/console/login" in first.headers["Location"]
    login = client.get("/console/login").data.decode()
    bad = client.post("/console/login", data=form(login, token="not-a-token"))
    assert bad.status_code == 401
    assert "mlemu_console_token" not in " ".join(bad.headers.getlist("Set-Cookie"))
    signed = client.post("/console/login", data=form(login, token=ADMIN_TOKEN))
    assert signed.status_code == 303
    cookie = next(c for c in signed.headers.getlist("Set-Cookie") if "mlemu_console_token" in c)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console/" in cookie
    page = client.get("/console/").data.decode()
    assert "user:ann@example.com" in page and "iris" in page
    assert ADMIN_TOKEN not in page  # the credential never reaches a page
    # try it runs with the signed-in principal's credentials; the snippets read MLEMU_TOKEN
    url = f"/console/projects/{PROJECT}/models/iris/versions/v1"
    version = client.get(url).data.decode()
    tried = client.post(url + "/try", data=form(version, body='{"instances": [[1, 0.5, 0, 0]]}'))
    text = tried.data.decode()
    assert 'id="result-status">200<' in text and "$MLEMU_TOKEN" in text and ADMIN_TOKEN not in text
    client.post("/console/logout", data=form(page))
    assert client.get("/console/").status_code == 303


def test_enforce_shows_what_the_principal_may_not_list(make_app, tmp_path):
    client = make_app(iris_bootstrap(tmp_path), default_project=PROJECT, iam_mode="enforce",
                      iam_config=iam_config(tmp_path))
    login = client.get("/console/login").data.decode()
    client.post("/console/login", data=form(login, token=NOBODY_TOKEN))
    page = client.get("/console/").data.decode()
    assert "Permission" in page and "ml.models.list" in page
    assert "/console/projects/demo/models/iris" not in page
    url = f"/console/projects/{PROJECT}/models/iris/versions/v1"
    denied = client.get(url)
    assert denied.status_code == 403


def test_the_setting_turns_the_console_off(make_app, tmp_path):
    client = make_app(iris_bootstrap(tmp_path), console=False)
    off = client.get("/console/")
    assert off.status_code == 404 and off.is_json
    assert client.get("/console/static/console.js").status_code == 404


def test_controls_and_requests_say_when_the_controls_are_absent(client):
    """In a build without the /_mlemu/ routes (they answer 404) the pages say so."""
    without_routes(client, "/_mlemu/")
    assert client.get("/_mlemu/faults").status_code == 404
    for path in ("/console/controls", "/console/requests"):
        page = client.get(path)
        assert page.status_code == 200 and b"not available in this build" in page.data
    csrf = client.get_cookie("mlemu_console_csrf", path="/console/").value
    added = client.post("/console/controls/reset", data={"csrf": csrf})
    assert added.status_code == 404 and b"not available in this build" in added.data


def test_vertex_section_says_when_the_vertex_api_is_absent(client):
    without_routes(client, f"/v1/projects/{PROJECT}/locations/")
    assert client.get(f"/v1/projects/{PROJECT}/locations/us-central1/models").status_code == 404
    page = client.get("/console/").data.decode()
    assert "The Vertex AI API is not available in this build." in page


def test_bad_project_or_location_is_refused_plainly(client):
    page = client.get("/console/?project=" + SCRIPT)
    assert page.status_code == 400 and SCRIPT.encode() not in page.data


def test_metrics_charts_from_two_samples(client):
    from console.web import STATE_KEY

    now = [1000.0]
    history = client.application.extensions[STATE_KEY].history
    history.clock = lambda: now[0]
    assert b"no data yet" in client.get("/console/metrics").data
    for _ in range(3):
        client.post(f"/v1/projects/{PROJECT}/models/iris:predict", json={"instances": [[1, 2, 3, 4]]})
    now[0] += 10
    page = client.get("/console/metrics/charts").data.decode()
    assert "<polyline" in page and "<td>iris</td>" in page
    assert "<td>0.30</td>" in page  # 3 requests in the 10 s between the samples


def test_overview_shows_batch_jobs_with_counts_and_their_log_tail(client):
    """Jobs as the store holds them mid-run (written directly: the pipeline itself is
    tests/clients/test_batch_jobs.py's subject) and the tail of the pipeline's log."""
    from registry import jobs

    emu = client.emu
    running = jobs.Job(jobs.job_name(PROJECT, "score_nightly"), {"dataFormat": "JSON"},
                       state="RUNNING", prediction_output={"predictionCount": "1200",
                                                           "errorCount": "3"})
    failed = jobs.Job(jobs.job_name(PROJECT, "broken"), {"dataFormat": "JSON"}, state="FAILED",
                      error_message="Input " + SCRIPT + " unreadable.")
    jobs.put_job(emu.store, running)
    jobs.put_job(emu.store, failed)
    log = emu.settings.jobs_path / PROJECT / "score_nightly" / "pipeline.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(50)) + f"stage {SCRIPT} done\n")
    text = client.get("/console/").data.decode()
    assert "score_nightly" in text and "RUNNING" in text
    assert "predictions: 1200 · errors: 3" in text
    assert "line 49" in text and "line 40" not in text  # the tail only
    assert "broken" in text and "FAILED" in text
    assert SCRIPT not in text and "stage &lt;script&gt;" in text
    assert 'data-reload="5"' in text  # a running job: the page reloads itself


def test_endpoint_page_says_when_the_vertex_api_is_absent(client):
    without_routes(client, f"/v1/projects/{PROJECT}/locations/")
    page = client.get(f"/console/projects/{PROJECT}/locations/us-central1/endpoints/123")
    assert page.status_code == 404
    assert b"The Vertex AI API is not available in this build." in page.data


def test_enforce_shows_figures_only_of_models_the_principal_may_list(make_app, tmp_path):
    """Metrics and loaded versions are labelled by model id, not project: under IAM enforce a
    principal sees those of the models it may list, and nothing of the others."""
    from console.web import STATE_KEY

    client = make_app(iris_bootstrap(tmp_path), default_project=PROJECT, iam_mode="enforce",
                      iam_config=iam_config(tmp_path))
    now = [1000.0]
    client.application.extensions[STATE_KEY].history.clock = lambda: now[0]
    login = client.get("/console/login").data.decode()
    client.post("/console/login", data=form(login, token=NOBODY_TOKEN))
    client.get("/console/metrics")
    answer = client.post(f"/v1/projects/{PROJECT}/models/iris:predict",
                         json={"instances": [[1, 2, 3, 4]]},
                         headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200
    now[0] += 10
    hidden = client.get("/console/metrics/charts").data.decode()
    assert "<td>iris</td>" not in hidden and "<polyline" not in hidden
    assert "iris/v1" not in client.get("/console/").data.decode()
    client.post("/console/login", data=form(login, token=ADMIN_TOKEN))
    shown = client.get("/console/metrics/charts").data.decode()
    assert "<td>iris</td>" in shown and "<polyline" in shown
    assert "iris/v1" in client.get("/console/").data.decode()
