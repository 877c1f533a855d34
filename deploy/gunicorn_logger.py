"""gunicorn's logger class for mlemu: gunicorn's own lines (the master's "Starting gunicorn",
"Booting worker", worker timeouts) go through the same handler as the app's, so in
MLEMU_LOG_FORMAT=json every line of the process tree is Cloud Logging JSON
(observability/logs.py). gunicorn's setup runs in the master before any hook, hence a logger
class rather than a hook."""

from __future__ import annotations

from typing import Any

from gunicorn import glogging

from boot import configure_logging
from core.settings import Settings


class Logger(glogging.Logger):  # type: ignore[misc]
    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        configure_logging(Settings.from_env())
