"""Journal rows for tests of controls/journal.py: one finished request each, `started` at
1,000 s + n so their order is known."""

from __future__ import annotations

from typing import Any

from controls.journal import entry


def row(n: int, **extra: Any) -> dict[str, Any]:
    """Row n of a V2 infer request to p/m/v1 (fields in `extra` replace or add to it)."""
    made = entry(protocol="v2", method="infer", transport="http", path="/v2/models/m/infer",
                 status="200", started=1_000.0 + n, seconds=0.001, caller="", project="p",
                 model="m", version="v1", instances=1)
    made.update(extra)
    return made
