"""The `Date` header of gunicorn's responses, formatted once a second instead of once a response.

gunicorn writes `Date: <IMF-fixdate>` on every response (gunicorn/http/wsgi.py
`Response.default_headers` calls `gunicorn.util.http_date()`, which formats the current time with
`email.utils.formatdate(usegmt=True)` each time). The header has a resolution of one second
(RFC 9110 section 5.6.7), so every response within a second carries the same text; formatting it
anew was ~2.5 % of a one-row `:predict`'s GIL time (py-spy, 2026-11-24). `install()` puts in a
function that gives exactly the same text, made once per second of the clock.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable

from gunicorn import util


class CachedHttpDate:
    """gunicorn.util.http_date's text, remembered for the current second."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        # (second, text) replaced as one object, so a thread never pairs one second's number
        # with another second's text; two threads that both format a new second agree.
        self._current: tuple[int, str] = (-1, "")

    def __call__(self, timestamp: float | None = None) -> str:
        if timestamp is not None:
            return email.utils.formatdate(timestamp, usegmt=True)
        second = int(self._clock())
        current = self._current
        if current[0] != second:
            current = self._current = (second, email.utils.formatdate(second, usegmt=True))
        return current[1]


def install() -> None:
    """Use the cached date in this process's gunicorn responses (a worker calls this once)."""
    if not isinstance(util.http_date, CachedHttpDate):
        util.http_date = CachedHttpDate()
