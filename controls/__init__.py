"""The emulator's controls: fault and latency rules, timing of long-running work, the request
journal and its settings (docs/controls.md).

`Controls` is what the Emulator holds. Its hooks are single calls: the data plane calls
`check(project, model, version)` once the version is resolved, the ml v1 management surface once
it knows the method, and the observability middleware hands each finished request to `record`.
Protocol and method come from the request context (observability/context.py), named as the
journal shows them (docs/controls.md lists them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controls import journal as journal_rows
from controls.db import ControlsDb
from controls.faults import Faults
from controls.journal import MAX_BODY_BYTES, Journal
from controls.timing import Timing
from core.errors import InvalidArgument
from observability import context

#: The journal's settings key in the controls database.
JOURNAL_SETTINGS = "journal"
#: Paths never journaled: the controls themselves and probes (they would drown what a test
#: asserts about its own calls).
UNJOURNALED = ("/_mlemu/", "/healthz", "/readyz", "/metrics")


class Controls:
    def __init__(self, state_dir: Path, *, sleep: Callable[[float], None] = time.sleep,
                 journal_rows_max: int = journal_rows.MAX_ROWS) -> None:
        self.db = ControlsDb(state_dir / "controls.sqlite3")
        self.faults = Faults(self.db)
        self.timing = Timing(self.db)
        self.journal = Journal(state_dir / "journal", max_rows=journal_rows_max)
        #: How a fault's delay waits (tests inject a recorder).
        self.sleep = sleep
        self._settings_seen: object = None
        self._body_limit = 0

    # --- faults ------------------------------------------------------------------------------

    def check(self, project: str, model: str, version: str, *, endpoint: str = "",
              deployed_model: str = "", api: str = "ml") -> None:
        """Apply the fault rules matching this request: wait, then raise the rule's error
        (`api`: the Google API the request is to, "ml" or "vertex", whose service a quota
        error's default details name). With no rule set this is one comparison of a shared
        word."""
        if not self.faults.live():
            return
        ctx = context.current()
        target = {"protocol": ctx.protocol if ctx else "", "method": ctx.method if ctx else "",
                  "project": project, "model": model, "version": version,
                  "endpoint": endpoint, "deployedModel": deployed_model}
        error, wait_ms = self.faults.decide(target, api)
        if wait_ms > 0:
            self.sleep(wait_ms / 1000.0)
        if error is not None:
            raise error

    # --- journal -----------------------------------------------------------------------------

    def body_limit(self) -> int:
        """Bytes of each request and response body the journal keeps (0: bodies are not kept)."""
        token = self.db.token()
        if token != self._settings_seen:
            settings = self.db.get_config(JOURNAL_SETTINGS) or {}
            self._body_limit = int(settings.get("maxBodyBytes", 0)) if settings.get(
                "recordBodies") else 0
            self._settings_seen = token
        return self._body_limit

    def journal_settings(self) -> dict[str, Any]:
        settings = self.db.get_config(JOURNAL_SETTINGS) or {}
        return {"recordBodies": bool(settings.get("recordBodies", False)),
                "maxBodyBytes": int(settings.get("maxBodyBytes", 0)),
                "maxRows": self.journal.max_rows}

    def set_journal_settings(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) - {"recordBodies", "maxBodyBytes"}:
            raise InvalidArgument("Journal settings are {\"recordBodies\": true|false, "
                                  "\"maxBodyBytes\": N}.")
        record = body.get("recordBodies", False)
        limit = body.get("maxBodyBytes", 4096)
        if not isinstance(record, bool) or isinstance(limit, bool) or not isinstance(limit, int) \
                or not 1 <= limit <= MAX_BODY_BYTES:
            raise InvalidArgument(f"recordBodies must be a boolean and maxBodyBytes an integer "
                                  f"from 1 to {MAX_BODY_BYTES}.")
        self.db.set_config(JOURNAL_SETTINGS, {"recordBodies": record, "maxBodyBytes": limit})
        return self.journal_settings()

    def record(self, ctx: context.RequestContext, transport: str, path: str, status: str,
               started: float, seconds: float, bodies: tuple[bytes, bytes] | None = None) -> None:
        """Journal one finished request (`started`: its wall-clock start)."""
        if path.startswith(UNJOURNALED) or not ctx.protocol or ctx.protocol in ("health", "other"):
            return
        row = journal_rows.entry(
            protocol=ctx.protocol, method=ctx.method, transport=transport, path=path,
            status=status, started=started, seconds=seconds, caller=ctx.caller,
            project=ctx.project, model=ctx.model, version=ctx.version, instances=ctx.instances,
            endpoint=ctx.endpoint, deployed_model=ctx.deployed_model)
        if bodies is not None:
            row["requestBody"] = bodies[0].decode("utf-8", "replace")
            row["responseBody"] = bodies[1].decode("utf-8", "replace")
        self.journal.record(row)

    def reset(self) -> None:
        """Every rule, timing setting, poll count and journal setting gone; the journal empty."""
        self.db.clear()
        self.journal.clear()
