"""Headless Chromium for the console's browser tests: Debian's `chromium` and `chromium-driver`
(the Makefile's SYSTEM_DEPS installs them) driven by selenium, with the browser's console log
read after each page (a JavaScript error or a refused resource is a SEVERE entry) and screenshots
kept under test-artifacts/console/ (gitignored)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

ARTIFACTS = ROOT / "test-artifacts" / "console"
WIDE, NARROW = (1280, 800), (390, 800)
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def new_driver(size: tuple[int, int] = WIDE):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for binary in (CHROMIUM, CHROMEDRIVER):
        if not Path(binary).exists():
            pytest.fail(f"{binary} is missing: install the Debian packages chromium and "
                        "chromium-driver (`make system-deps` does).")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-extensions", "--no-first-run", "--hide-scrollbars",
                f"--window-size={size[0]},{size[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver = new_driver()
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def blank_page(browser) -> None:
    """Each test starts on a blank page with an empty console log: what a page left behind (a
    fetch cut short by leaving it) is not the next test's error."""
    browser.get("about:blank")
    browser.get_log("browser")


def waiter(driver, timeout: float = 60.0):
    """A WebDriverWait that also retries while the page is being replaced: an element found
    on the old page goes stale when a form's submit navigates (seen in CI on a loaded machine).
    The timeout is a bound for a broken page, not a target."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, ignored_exceptions=(
        NoSuchElementException, StaleElementReferenceException))


def resize(driver, size: tuple[int, int]) -> None:
    """The viewport (not the window) at `size`, so pages are checked at exactly that width."""
    driver.set_window_size(*size)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    driver.set_window_size(size[0] + size[0] - inner[0], size[1] + size[1] - inner[1])


def severe_entries(driver) -> list[str]:
    """The browser console's errors since the last call (JavaScript errors, CSP refusals, 404s
    of the page's own resources); reading the log empties it."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def screenshot(driver, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def fits_width(driver) -> bool:
    """Nothing wider than the window (no sideways scrolling of the page itself)."""
    return bool(driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth + 1;"))


def unlabelled_controls(driver) -> list[str]:
    """Form controls a screen reader could not name: no <label>, no aria-label."""
    return driver.execute_script("""
        return Array.from(document.querySelectorAll(
            'input:not([type=hidden]), select, textarea, button'))
          .filter(e => e.labels && e.labels.length === 0 && !e.getAttribute('aria-label')
                       && !(e.tagName === 'BUTTON' && e.textContent.trim()))
          .map(e => e.outerHTML);""")


def copy_to(path: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)
