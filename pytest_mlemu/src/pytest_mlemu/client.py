"""The controls client: mlemu's /_mlemu/ endpoints as methods, and journal assertions."""

from __future__ import annotations

import json
from typing import Any

import requests


class MlemuError(AssertionError):
    """A controls call the server refused (its status and message)."""


class Mlemu:
    """mlemu's controls (reset, faults, timing, journal, snapshots) at `url`."""

    def __init__(self, url: str, token: str | None = None, session: requests.Session | None = None):
        self.url = url.rstrip("/")
        self.session = session or requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        answer = self.session.request(method, f"{self.url}/_mlemu/{path}", timeout=120, **kwargs)
        if answer.status_code != 200:
            try:
                message = answer.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = answer.text[:500]
            raise MlemuError(f"{method} /_mlemu/{path}: {answer.status_code} {message}")
        if answer.headers.get("Content-Type", "").startswith("application/gzip"):
            return answer.content
        return answer.json()

    # --- state ---------------------------------------------------------------------------------

    def reset(self, project: str | None = None) -> None:
        """Back to the starting state: the bootstrap models (still loaded), no rules, no journal."""
        self._call("POST", "reset", json={"project": project} if project else {})

    def snapshot(self) -> bytes:
        """The whole state as a gzip archive."""
        return bytes(self._call("GET", "snapshot"))

    def restore(self, archive: bytes) -> None:
        self._call("POST", "snapshot", data=archive,
                   headers={"Content-Type": "application/gzip"})

    # --- faults --------------------------------------------------------------------------------

    def fault(self, *, match: dict[str, str] | None = None, error: dict[str, Any] | None = None,
              **fields: Any) -> dict[str, Any]:
        """Add a fault rule (`delayMs`, `delay`, `probability`, `seed`, `times` as keywords);
        the rule as the server stored it, with its `id`."""
        rule: dict[str, Any] = {"match": match or {}, **fields}
        if error is not None:
            rule["error"] = error
        return dict(self._call("POST", "faults", json=rule))

    def quota_exhausted(self, times: int | None = None, message: str = "Quota exceeded.",
                        **match: str) -> dict[str, Any]:
        """The usual fault: 429 RESOURCE_EXHAUSTED (with Google's quota details)."""
        extra = {"times": times} if times is not None else {}
        return self.fault(match=match, error={"code": 429, "status": "RESOURCE_EXHAUSTED",
                                              "message": message}, **extra)

    def faults(self) -> list[dict[str, Any]]:
        """Every rule with its `hits`."""
        return list(self._call("GET", "faults")["faults"])

    def delete_fault(self, rule_id: str) -> None:
        self._call("DELETE", f"faults/{rule_id}")

    def clear_faults(self) -> None:
        self._call("DELETE", "faults")

    # --- timing --------------------------------------------------------------------------------

    def timing(self, operation_type: str, *, seconds: float | None = None,
               polls: int | None = None, fail: dict[str, Any] | None = None) -> dict[str, Any]:
        """How operations of `operation_type` (CREATE_VERSION, BATCH_PREDICTION, ...) finish."""
        rule: dict[str, Any] = {"operationType": operation_type}
        if seconds is not None:
            rule["after"] = {"seconds": seconds}
        elif polls is not None:
            rule["after"] = {"polls": polls}
        if fail is not None:
            rule["fail"] = fail
        return dict(self._call("PUT", "timing", json=rule))

    def clear_timing(self) -> None:
        self._call("DELETE", "timing")

    # --- the request journal -------------------------------------------------------------------

    def requests(self, **filters: Any) -> list[dict[str, Any]]:
        """Journal entries matching `filters` (protocol, method, project, model, version, status,
        since, limit, ...), oldest first."""
        params = {key: str(value) for key, value in filters.items()}
        return list(self._call("GET", "requests", params=params)["requests"])

    def clear_requests(self) -> None:
        self._call("DELETE", "requests")

    def record_bodies(self, enabled: bool = True, max_bytes: int = 4096) -> None:
        """Keep (the first `max_bytes` of) request and response bodies in the journal."""
        self._call("PUT", "requests/settings",
                   json={"recordBodies": enabled, "maxBodyBytes": max_bytes})

    def assert_requests(self, count: int, **filters: Any) -> list[dict[str, Any]]:
        """Assert the journal holds exactly `count` entries matching `filters`; returns them."""
        found = self.requests(**filters)
        if len(found) != count:
            shown = json.dumps(found, indent=1)[:4000]
            raise AssertionError(f"expected {count} request(s) matching {filters}, the journal "
                                 f"has {len(found)}:\n{shown}")
        return found
