"""The ml v1 surface against the discovery document: the committed snapshot and
docs/management.md's coverage table are current, and every method mlemu does not implement
answers 501 in the Google error format (while the implemented ones, predict included, do not)."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

from api.unimplemented import NAME_PATHS, coverage
from tests.conftest import ROOT


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("ml_v1_discovery", ROOT / "tools" / "ml_v1_discovery.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_snapshot_and_coverage_table_are_current() -> None:
    assert _tool().outdated() == [], "run: python tools/ml_v1_discovery.py"


def test_unimplemented_methods_answer_501_and_implemented_ones_do_not(make_app: Any) -> None:
    client = make_app()
    rows = coverage(client.application)
    assert len(rows) == len({r.method.id for r in rows}) > 40
    implemented = {r.method.id for r in rows if r.implemented}
    assert {"ml.projects.predict", "ml.projects.explain", "ml.projects.getConfig",
            "ml.projects.models.create",
            "ml.projects.models.versions.setDefault", "ml.projects.operations.cancel"} <= implemented
    for row in rows:
        for path in NAME_PATHS.get(row.method.id, [row.method.flat_path]):
            url = "/" + re.sub(r"\{\w+\}", "x", path)
            resp = client.open(url, method=row.method.http_method, json={})
            error = resp.json.get("error", {}) if isinstance(resp.json, dict) else {}
            if row.implemented:
                assert resp.status_code != 501, (row.method.id, resp.json)
            else:
                assert resp.status_code == 501, (row.method.id, resp.status_code)
                assert error == {"code": 501, "status": "UNIMPLEMENTED",
                                 "message": f"Method {row.method.id} is not implemented by mlemu."}
