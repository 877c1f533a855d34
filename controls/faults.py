"""Fault rules in the controls database: add, list (with hit counts), delete, and the decision a
request gets (an error to raise, a delay to wait).

Each process caches the rules that can still fire and re-reads them only when the database's
change word moved (controls/db.py), so a request with no rule set costs a word comparison. A
matching rule's evaluation is counted in one write transaction, so `times` and a seeded
probability mean the same across every worker and gRPC process.
"""

from __future__ import annotations

import json
from typing import Any

from controls.db import ControlsDb
from controls.quota_details import default_details
from controls.rules import FaultRule, parse_rule
from core.errors import ApiError, Code, InvalidArgument, NotFound, from_code

#: Rules one server holds at once (each is evaluated on every matching request).
MAX_RULES = 100


def fault_error(error: dict[str, Any], api: str = "ml", method: str = "") -> ApiError:
    """The ApiError a rule's `error` answers with; each protocol renders it in its own shape.
    A rule without `details` gets the defaults of the API the request is to (`api`, `method`:
    rules.default_details)."""
    code = Code[error["status"]]
    exc = from_code(code, error["message"], http_status=error["code"])
    details = error.get("details")
    exc.details = list(default_details(code, error["message"], api, method)
                       if details is None else details)
    if error["status"] == "RESOURCE_EXHAUSTED":
        exc.headers = {"Retry-After": "1"}
    return exc


class Faults:
    def __init__(self, db: ControlsDb) -> None:
        self.db = db
        self._seen: object = None
        #: The rules that can still fire, in the order they were added.
        self._live: tuple[FaultRule, ...] = ()

    def live(self) -> tuple[FaultRule, ...]:
        """The cached rules, re-read if any process changed them."""
        token = self.db.token()
        if token != self._seen:
            rules = []
            for rule_id, body, hits in self.db.query("SELECT id, body, hits FROM faults ORDER BY id"):
                rule = parse_rule(json.loads(body), str(rule_id))
                if rule.times is None or hits < rule.times:
                    rules.append(rule)
            self._live, self._seen = tuple(rules), token
        return self._live

    def add(self, body: Any) -> dict[str, Any]:
        if isinstance(body, dict) and "id" in body:
            raise InvalidArgument("Invalid fault rule: the server assigns its id.")
        rule = parse_rule(body, "0")  # validated before anything is written
        stored = rule.body()
        del stored["id"]
        with self.db.transaction() as conn:
            (count,) = conn.execute("SELECT COUNT(*) FROM faults").fetchone()
            if count >= MAX_RULES:
                raise InvalidArgument(f"This server already holds {MAX_RULES} fault rules; "
                                      "delete some first.")
            cursor = conn.execute("INSERT INTO faults(body) VALUES (?)", (json.dumps(stored),))
        return {"id": str(cursor.lastrowid), **stored, "hits": 0}

    def list(self) -> list[dict[str, Any]]:
        out = []
        for rule_id, body, hits in self.db.query("SELECT id, body, hits FROM faults ORDER BY id"):
            out.append({"id": str(rule_id), **json.loads(body), "hits": hits})
        return out

    def delete(self, rule_id: str) -> None:
        with self.db.transaction() as conn:
            deleted = rule_id.isdigit() and conn.execute(
                "DELETE FROM faults WHERE id = ?", (int(rule_id),)).rowcount > 0
        if not deleted:
            raise NotFound(f"There is no fault rule {rule_id!r}.")

    def clear(self, project: str | None = None) -> None:
        """Delete every rule, or those whose match names `project`."""
        with self.db.transaction() as conn:
            if project is None:
                conn.execute("DELETE FROM faults")
                return
            for rule_id, body in conn.execute("SELECT id, body FROM faults").fetchall():
                if json.loads(body).get("match", {}).get("project") == project:
                    conn.execute("DELETE FROM faults WHERE id = ?", (rule_id,))

    def decide(self, target: dict[str, str], api: str = "ml") -> tuple[ApiError | None, float]:
        """The error (None: serve normally) and the milliseconds to wait first, for a request
        `target` describes (protocol, method, project, model, ...) to `api` ("ml" or
        "vertex")."""
        wait_ms = 0.0
        for rule in self.live():
            if not rule.matches(target):
                continue
            evaluation = self._evaluate(rule)
            if evaluation is None:
                continue
            wait_ms += rule.wait_ms(evaluation)
            if rule.error is not None:
                return fault_error(rule.error, api, target.get("method", "")), wait_ms
        return None, wait_ms

    def _evaluate(self, rule: FaultRule) -> int | None:
        """Count one evaluation of `rule`; its number if the rule fires, else None."""
        exhausted = False
        with self.db.transaction(changes=False) as conn:
            row = conn.execute("SELECT hits, evaluations FROM faults WHERE id = ?",
                               (int(rule.id),)).fetchone()
            if row is None or (rule.times is not None and row[0] >= rule.times):
                return None  # deleted or used up by another process meanwhile
            hits, evaluation = row[0], row[1] + 1
            fired = rule.fires(evaluation)
            hits += fired
            conn.execute("UPDATE faults SET hits = ?, evaluations = ? WHERE id = ?",
                         (hits, evaluation, int(rule.id)))
            exhausted = rule.times is not None and hits >= rule.times
        if exhausted:  # every process drops it from its cached rules
            self.db.signal()
        return evaluation if fired else None
