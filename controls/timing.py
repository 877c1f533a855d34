"""Timing of long-running work, per operation type: finish at once (the default), after N
seconds, after N polls (`operations.get`, `jobs.get`), or fail with a given status and message.

A rule is keyed by the task type the task runner knows (registry/tasks.py): ml v1's
CREATE_VERSION, DELETE_VERSION, UPDATE_VERSION, UPDATE_MODEL, DELETE_MODEL and BATCH_PREDICTION,
and whatever types other APIs register on the same runner, so they take rules without a change
here. The runner asks `hold` before a task's work and waits while it says so.
"""

from __future__ import annotations

import json
import re
from typing import Any

from controls.db import ControlsDb
from core.errors import ApiError, Code, InvalidArgument, from_code

_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,99}")
#: What "after" may ask for: an hour of waiting, or ten thousand polls.
MAX_SECONDS = 3_600
MAX_POLLS = 10_000
MAX_RULES = 100


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument(f"Invalid timing rule: {message}")


def _count(value: Any, where: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
        raise _bad(f"{where} must be a number from 0 to {high:g}.")
    return value


def parse_timing(body: Any) -> dict[str, Any]:
    """A validated timing rule (as stored and listed)."""
    if not isinstance(body, dict) or set(body) - {"operationType", "after", "fail"}:
        raise _bad('a rule is {"operationType": T, "after": {"seconds": N} | {"polls": N}, '
                   '"fail": {"code": C, "message": M}}.')
    op_type = body.get("operationType")
    if not isinstance(op_type, str) or not _TYPE.fullmatch(op_type):
        raise _bad("operationType must name an operation type, e.g. CREATE_VERSION.")
    rule: dict[str, Any] = {"operationType": op_type}
    after = body.get("after")
    if after is not None:
        if not isinstance(after, dict) or len(after) != 1 or set(after) - {"seconds", "polls"}:
            raise _bad('after must be {"seconds": N} or {"polls": N}.')
        if "seconds" in after:
            rule["after"] = {"seconds": _count(after["seconds"], "after.seconds", MAX_SECONDS)}
        else:
            polls = after["polls"]
            if isinstance(polls, bool) or not isinstance(polls, int):
                raise _bad("after.polls must be an integer.")
            rule["after"] = {"polls": int(_count(polls, "after.polls", MAX_POLLS))}
    fail = body.get("fail")
    if fail is not None:
        if not isinstance(fail, dict) or set(fail) - {"code", "message"}:
            raise _bad("fail must be {\"code\": C, \"message\": M}.")
        rule["fail"] = {"code": _code(fail.get("code", "INTERNAL")).name,
                        "message": _message(fail.get("message", "Failed by an mlemu timing rule."))}
    return rule


def _code(value: Any) -> Code:
    if isinstance(value, str) and value in Code.__members__ and value != "OK":
        return Code[value]
    if isinstance(value, int) and not isinstance(value, bool):
        for code in Code:
            if code.number == value and code is not Code.OK:
                return code
    raise _bad(f"fail.code {value!r} is not a google.rpc.Code (name or number) other than OK.")


def _message(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 2_000:
        raise _bad("fail.message must be a string of at most 2000 characters.")
    return value


class Timing:
    def __init__(self, db: ControlsDb) -> None:
        self.db = db
        self._seen: object = None
        self._rules: dict[str, dict[str, Any]] = {}

    def rules(self) -> dict[str, dict[str, Any]]:
        token = self.db.token()
        if token != self._seen:
            self._rules = {t: json.loads(b) for t, b in
                           self.db.query("SELECT operation_type, body FROM timing")}
            self._seen = token
        return self._rules

    def put(self, body: Any) -> dict[str, Any]:
        rule = parse_timing(body)
        with self.db.transaction() as conn:
            (count,) = conn.execute("SELECT COUNT(*) FROM timing WHERE operation_type != ?",
                                    (rule["operationType"],)).fetchone()
            if count >= MAX_RULES:
                raise _bad(f"this server already holds {MAX_RULES} timing rules.")
            conn.execute("INSERT INTO timing(operation_type, body) VALUES (?, ?) ON CONFLICT"
                         "(operation_type) DO UPDATE SET body = excluded.body",
                         (rule["operationType"], json.dumps(rule)))
        return rule

    def list(self) -> list[dict[str, Any]]:
        return [json.loads(b) for (b,) in
                self.db.query("SELECT body FROM timing ORDER BY operation_type")]

    def clear(self, op_type: str | None = None) -> None:
        with self.db.transaction() as conn:
            if op_type is None:
                conn.execute("DELETE FROM timing")
            else:
                conn.execute("DELETE FROM timing WHERE operation_type = ?", (op_type,))

    def polled(self, name: str) -> None:
        """Count one poll (operations.get, jobs.get) of the operation or job `name`, if a rule
        waits for polls (otherwise nothing is written)."""
        if not any("polls" in r.get("after", {}) for r in self.rules().values()):
            return
        with self.db.transaction(changes=False) as conn:
            conn.execute("INSERT INTO polls(operation, count) VALUES (?, 1) ON CONFLICT(operation)"
                         " DO UPDATE SET count = count + 1", (name,))

    def polls(self, name: str) -> int:
        rows = self.db.query("SELECT count FROM polls WHERE operation = ?", (name,))
        return int(rows[0][0]) if rows else 0

    def hold(self, task_type: str, name: str, age_s: float) -> float | ApiError | None:
        """For a task of `task_type` named `name`, started `age_s` seconds ago: seconds to wait
        before looking again (a float), the error to end it with (its rule fails it), or None
        (run it now)."""
        rule = self.rules().get(task_type)
        if rule is None:
            return None
        after = rule.get("after", {})
        if "seconds" in after and age_s < after["seconds"]:
            return float(min(0.25, after["seconds"] - age_s))
        if "polls" in after and self.polls(name) < after["polls"]:
            return 0.05
        fail = rule.get("fail")
        if fail is not None:
            return from_code(Code[fail["code"]], fail["message"])
        return None
