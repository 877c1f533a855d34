"""The console in a real browser (headless Chromium through selenium) against `app.py serve`:
every page loads with no JavaScript error at 1280x800 and in a narrow window, "try it" shows the
prediction and its curl and Python snippets give the same answer when run, the pages work from
the keyboard, and the overview's screenshot for the README is made here.

Screenshots are kept in test-artifacts/console/ (gitignored)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions

from tests.conftest import ROOT, start_server, stop_server
from tests.console.browserkit import (
    NARROW,
    WIDE,
    blank_page,
    browser,
    copy_to,
    fits_width,
    resize,
    screenshot,
    severe_entries,
    unlabelled_controls,
    waiter,
)
from tests.console.consolekit import PROJECT, iris_bootstrap

__all__ = ["blank_page", "browser"]  # the fixtures, imported for this module
pytestmark = pytest.mark.slow
README_SHOT = ROOT / "docs" / "img" / "console-overview.png"
INSTANCES = [[1.0, 0.5, 0.0, 0.0], [-2.0, -1.0, 0.0, 0.0]]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console-browser")
    live = start_server(tmp / "state", iris_bootstrap(tmp), env={"MLEMU_PROJECT": PROJECT})
    ml = f"{live.url}/v1/projects/{PROJECT}"
    created = requests.post(f"{ml}/models", json={
        "name": "census", "description": "Income over 50K (<b>not bold</b>)",
        "labels": {"team": "ds", "stage": "<script>alert(1)</script>"}}, timeout=30)
    assert created.status_code == 200, created.text
    for _ in range(3):
        answer = requests.post(f"{ml}/models/iris:predict", json={"instances": INSTANCES}, timeout=30)
        assert answer.json() == {"predictions": [1, 0]}
    yield live
    stop_server(live.proc)


def pages(url: str) -> dict[str, str]:
    version = f"{url}/console/projects/{PROJECT}/models/iris/versions/v1"
    return {"overview": f"{url}/console/", "model": f"{url}/console/projects/{PROJECT}/models/iris",
            "version": version, "metrics": f"{url}/console/metrics",
            "requests": f"{url}/console/requests", "controls": f"{url}/console/controls",
            "login": f"{url}/console/login"}


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["1280x800", "narrow"])
def test_every_page_loads_without_javascript_errors(server, browser, size):
    resize(browser, size)
    severe_entries(browser)
    for name, url in pages(server.url).items():
        browser.get(url)
        waiter(browser).until(lambda d: d.execute_script(
            "return document.readyState") == "complete")
        assert browser.find_element(By.TAG_NAME, "h1").text, name
        assert "mlemu" in browser.title
        shot = screenshot(browser, f"{name}-{size[0]}x{size[1]}")
        assert shot.stat().st_size > 0
        assert severe_entries(browser) == [], name
        assert fits_width(browser), f"{name} scrolls sideways at {size}"
        assert unlabelled_controls(browser) == [], name
    # the label holding a script tag is text on the page, never markup
    browser.get(pages(server.url)["overview"])
    assert "<script>alert(1)</script>" in browser.find_element(By.ID, "main").text
    assert severe_entries(browser) == []


def test_try_it_shows_the_prediction_and_the_snippets_answer_alike(server, browser):
    resize(browser, WIDE)
    browser.get(pages(server.url)["version"])
    body = browser.find_element(By.ID, "body")
    body.clear()
    body.send_keys(json.dumps({"instances": INSTANCES}))
    browser.find_element(By.ID, "send").click()
    answer = waiter(browser).until(
        expected_conditions.visibility_of_element_located((By.ID, "answer")))
    assert json.loads(answer.text) == {"predictions": [1, 0]}
    assert browser.find_element(By.ID, "result-status").text == "200"
    assert browser.find_element(By.ID, "result-ms").text.endswith(" ms")
    screenshot(browser, "try-it")
    assert severe_entries(browser) == []
    # The snippets are what a user copies: run them against the same server.
    curl = browser.find_element(By.ID, "curl").text
    ran = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60,
                         check=False)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"predictions": [1, 0]}
    python = browser.find_element(By.ID, "python").text
    ran = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True,
                         timeout=120, check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "{'predictions': [1, 0]}"


def test_try_it_from_the_keyboard(server, browser):
    resize(browser, WIDE)
    browser.get(pages(server.url)["version"])
    page = browser.find_element(By.TAG_NAME, "body")
    page.send_keys(Keys.TAB)  # the first stop is the skip link
    active = browser.switch_to.active_element
    assert active.text == "Skip to content"
    body = browser.find_element(By.ID, "body")
    assert browser.find_element(By.CSS_SELECTOR, "label[for=body]").text  # labelled
    body.send_keys(Keys.CONTROL, "a")
    body.send_keys(json.dumps({"instances": INSTANCES[:1]}))
    body.send_keys(Keys.TAB)  # to the Send button
    assert browser.switch_to.active_element.get_attribute("id") == "send"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    answer = waiter(browser).until(
        expected_conditions.visibility_of_element_located((By.ID, "answer")))
    assert json.loads(answer.text) == {"predictions": [1]}
    assert severe_entries(browser) == []


def test_metrics_page_refreshes_its_charts(server, browser):
    resize(browser, WIDE)
    browser.get(pages(server.url)["metrics"])
    first = browser.find_element(By.ID, "charts").text
    requests.post(f"{server.url}/v1/projects/{PROJECT}/models/iris:predict",
                  json={"instances": INSTANCES}, timeout=30)
    # the page's script fetches the charts again; the server samples again when 5 s have passed
    waiter(browser).until(lambda d: d.find_element(By.ID, "charts").text != first)
    assert browser.find_elements(By.CSS_SELECTOR, "#charts svg.chart polyline")
    screenshot(browser, "metrics-refreshed")
    assert severe_entries(browser) == []


def test_overview_screenshot_for_the_readme(server, browser):
    """Makes the README's overview screenshot: kept with the test artifacts, and written to
    docs/img/console-overview.png when that is missing or MLEMU_UPDATE_SCREENSHOTS=1 (so a
    test run never dirties the checkout)."""
    resize(browser, WIDE)
    browser.get(pages(server.url)["overview"])
    shot = screenshot(browser, "overview-readme")
    from PIL import Image

    small_shot = shot.with_name("overview-readme-small.png")
    with Image.open(shot) as image:  # a palette PNG: a few tens of KB for the README
        image.convert("RGB").quantize(colors=64).save(small_shot, optimize=True)
    assert 0 < small_shot.stat().st_size < 200_000
    if not README_SHOT.exists() or os.environ.get("MLEMU_UPDATE_SCREENSHOTS") == "1":
        README_SHOT.parent.mkdir(parents=True, exist_ok=True)
        copy_to(small_shot, README_SHOT)


def test_sign_in_under_iam_enforce_keeps_the_token_from_scripts(tmp_path, browser):
    """IAM enforced: the console asks for a token once; the cookie holding it is invisible to
    the page's scripts (HttpOnly) and the pages act with its principal."""
    from tests.console.consolekit import ADMIN_TOKEN, iam_config

    live = start_server(tmp_path / "state", iris_bootstrap(tmp_path), env={
        "MLEMU_PROJECT": PROJECT, "MLEMU_IAM_MODE": "enforce",
        "MLEMU_IAM_CONFIG": str(iam_config(tmp_path))})
    try:
        resize(browser, WIDE)
        browser.delete_all_cookies()
        browser.get(f"{live.url}/console/")
        assert browser.current_url.startswith(f"{live.url}/console/login")
        token = browser.find_element(By.ID, "token")
        assert browser.find_element(By.CSS_SELECTOR, "label[for=token]").text == "Token"
        token.send_keys(ADMIN_TOKEN, Keys.ENTER)
        waiter(browser).until(lambda d: d.find_element(By.TAG_NAME, "h1").text
                                         == "Overview")
        assert "user:ann@example.com" in browser.find_element(By.CLASS_NAME, "who").text
        assert "iris" in browser.find_element(By.ID, "main").text
        assert "mlemu_console" not in browser.execute_script("return document.cookie;")
        held = {c["name"]: c for c in browser.get_cookies()}
        assert held["mlemu_console_token"]["httpOnly"] is True
        assert held["mlemu_console_token"]["sameSite"] == "Strict"
        assert ADMIN_TOKEN not in browser.page_source
        screenshot(browser, "overview-signed-in")
        assert severe_entries(browser) == []
        browser.find_element(By.CSS_SELECTOR, ".signout button").click()
        waiter(browser).until(lambda d: d.current_url.startswith(
            f"{live.url}/console/login"))
        assert "mlemu_console_token" not in {c["name"] for c in browser.get_cookies()}
    finally:
        stop_server(live.proc)
        browser.delete_all_cookies()
