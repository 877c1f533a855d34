"""The console's Controls and Requests pages in a real browser, driving the emulator controls
(`/_mlemu/`): a fault added in the console is what the API answers next, the journal shows the
requests, reset empties the overview of what the API created.

These need the emulator controls in the build (the controls work lands separately); without
them the pages show their "not available in this build" notice, which
tests/console/test_console_pages.py checks."""

from __future__ import annotations

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.conftest import start_server, stop_server
from tests.console.browserkit import (
    WIDE,
    blank_page,
    browser,
    resize,
    screenshot,
    severe_entries,
    unlabelled_controls,
    waiter,
)
from tests.console.consolekit import PROJECT, iris_bootstrap

__all__ = ["blank_page", "browser"]  # the fixtures, imported for this module
pytestmark = pytest.mark.slow
INSTANCES = [[1.0, 0.5, 0.0, 0.0]]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console-controls")
    live = start_server(tmp / "state", iris_bootstrap(tmp), env={"MLEMU_PROJECT": PROJECT})
    yield live
    stop_server(live.proc)


def predict(server) -> requests.Response:
    return requests.post(f"{server.url}/v1/projects/{PROJECT}/models/iris/versions/v1:predict",
                         json={"instances": INSTANCES}, timeout=30)


def fill(browser, field_id: str, text: str) -> None:
    field = browser.find_element(By.ID, field_id)
    field.clear()
    field.send_keys(text)


def test_a_fault_added_in_the_console_is_what_the_api_answers_next(server, browser):
    resize(browser, WIDE)
    browser.get(f"{server.url}/console/controls")
    assert unlabelled_controls(browser) == []
    Select(browser.find_element(By.ID, "f-protocol")).select_by_value("aiplatform")
    fill(browser, "f-method", "predict")
    fill(browser, "f-project", PROJECT)
    fill(browser, "f-model", "iris")
    fill(browser, "f-code", "429")
    fill(browser, "f-status", "RESOURCE_EXHAUSTED")
    fill(browser, "f-message", "Quota exceeded in the console test.")
    fill(browser, "f-times", "1")
    browser.find_element(By.CSS_SELECTOR, "#add-fault button[type=submit]").click()
    message = waiter(browser).until(lambda d: d.find_element(By.ID, "message"))
    assert message.text == "Fault rule added."
    assert severe_entries(browser) == []
    refused = predict(server)
    assert refused.status_code == 429, refused.text
    assert "Quota exceeded in the console test." in refused.text
    assert predict(server).json() == {"predictions": [1]}  # `times: 1`: spent
    browser.get(f"{server.url}/console/controls")
    rows = browser.find_elements(By.CSS_SELECTOR, "section[aria-labelledby=faults] tbody tr")
    assert len(rows) == 1 and rows[0].find_elements(By.TAG_NAME, "td")[3].text == "1"  # hits
    screenshot(browser, "controls-with-fault")
    rows[0].find_element(By.TAG_NAME, "button").click()
    waiter(browser).until(lambda d: d.find_element(By.ID, "message").text
                                     == "Fault rule removed.")
    assert "No fault rules." in browser.find_element(By.ID, "main").text
    assert severe_entries(browser) == []


def test_the_journal_lists_requests_filtered(server, browser):
    resize(browser, WIDE)
    assert predict(server).status_code == 200
    browser.get(f"{server.url}/console/requests?model=iris")
    entries = browser.find_elements(By.CSS_SELECTOR, "ol.journal > li details")
    assert entries, browser.find_element(By.ID, "main").text
    assert "predict" in entries[0].text and "iris" in entries[0].text
    browser.get(f"{server.url}/console/requests?model=no-such-model")
    assert "No requests recorded that match." in browser.find_element(By.ID, "main").text
    screenshot(browser, "requests")
    assert severe_entries(browser) == []


def test_reset_empties_the_overview(server, browser):
    """Reset returns the emulator to its starting state: what the API created goes (the
    bootstrap file's model stays, as the controls document)."""
    resize(browser, WIDE)
    created = requests.post(f"{server.url}/v1/projects/{PROJECT}/models",
                            json={"name": "scratch"}, timeout=30)
    assert created.status_code == 200, created.text
    browser.get(f"{server.url}/console/?project={PROJECT}")
    assert "scratch" in browser.find_element(By.ID, "main").text
    browser.get(f"{server.url}/console/controls")
    browser.find_element(By.CSS_SELECTOR, "#reset button[type=submit]").click()
    waiter(browser).until(lambda d: d.find_element(By.ID, "message").text
                                     .startswith("Reset"))
    browser.get(f"{server.url}/console/?project={PROJECT}")
    text = browser.find_element(By.ID, "main").text
    assert "scratch" not in text and "iris" in text
    screenshot(browser, "overview-after-reset")
    assert severe_entries(browser) == []


def test_controls_and_requests_read_in_a_narrow_window(server, browser):
    from tests.console.browserkit import NARROW, fits_width

    resize(browser, NARROW)
    for path in ("/console/controls", "/console/requests"):
        browser.get(server.url + path)
        assert fits_width(browser), path
        assert unlabelled_controls(browser) == [], path
        screenshot(browser, path.rsplit("/", 1)[-1] + "-narrow-with-controls")
        assert severe_entries(browser) == [], path
    resize(browser, WIDE)
