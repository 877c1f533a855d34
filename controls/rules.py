"""Fault rules: what a rule may say (validated once, when it is added), which requests it matches,
and whether a given evaluation fires and how long it waits.

A rule is JSON (docs/controls.md):

    {"match": {"protocol": "aiplatform", "method": "predict", "project": "demo", "model": "iris"},
     "error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded"},
     "delayMs": 0, "probability": 1.0, "seed": 1, "times": 2}

Every decision here is a pure function of the rule and the evaluation's number, so the same seed
gives the same sequence whichever worker or gRPC process draws it (the count lives in the shared
controls database, controls/db.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

from core.errors import Code, InvalidArgument

#: The fields a rule's `match` may name, as they appear in the JSON rule.
MATCH_FIELDS = ("protocol", "method", "project", "model", "version", "endpoint", "deployedModel")
RULE_FIELDS = {"id", "match", "error", "delayMs", "delay", "probability", "seed", "times"}
#: What a client may make a server hold: a delay longer than this would outlive a worker's
#: request timeout anyway.
MAX_DELAY_MS = 30_000
MAX_MESSAGE = 2_000
MAX_DETAILS_BYTES = 8_192
MAX_TEXT = 200


def bad(message: str) -> InvalidArgument:
    return InvalidArgument(f"Invalid fault rule: {message}")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise bad(f"{where} must be a non-empty string of at most {MAX_TEXT} characters.")
    return value


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise bad(f"{where} must be a number from {low:g} to {high:g}.")
    return float(value)


def _integer(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad(f"{where} must be an integer from {low} to {high}.")
    return value


def _error(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or set(body) - {"code", "status", "message", "details"}:
        raise bad("error must be an object with code, status, message and details.")
    status, code = body.get("status"), body.get("code")
    if status is not None:
        if not isinstance(status, str) or status not in Code.__members__ or status == "OK":
            raise bad(f"error.status {status!r} is not a google.rpc.Code name other than OK.")
        canonical = Code[status]
    elif code is not None:
        number = _integer(code, "error.code", 400, 599)
        canonical = next((c for c in Code if c.http_status == number), Code.UNKNOWN)
    else:
        raise bad("error needs a status (e.g. RESOURCE_EXHAUSTED) or an HTTP code.")
    http = _integer(code, "error.code", 400, 599) if code is not None else canonical.http_status
    message = body.get("message", f"Fault injected by mlemu: {canonical.name}.")
    if not isinstance(message, str) or len(message) > MAX_MESSAGE:
        raise bad(f"error.message must be a string of at most {MAX_MESSAGE} characters.")
    details = body.get("details")
    if details is not None and (not isinstance(details, list)
                                or not all(isinstance(d, dict) for d in details)
                                or len(json.dumps(details)) > MAX_DETAILS_BYTES):
        raise bad(f"error.details must be a list of objects of at most {MAX_DETAILS_BYTES} bytes.")
    error = {"code": http, "status": canonical.name, "message": message}
    if details is not None:  # else the defaults of the API answering (controls/quota_details.py)
        error["details"] = details
    return error


def _delay(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad("delay must be an object.")
    kind = body.get("distribution")
    if kind == "uniform" and set(body) == {"distribution", "minMs", "maxMs"}:
        low = _number(body["minMs"], "delay.minMs", 0, MAX_DELAY_MS)
        high = _number(body["maxMs"], "delay.maxMs", low, MAX_DELAY_MS)
        return {"distribution": kind, "minMs": low, "maxMs": high}
    if kind == "exponential" and set(body) == {"distribution", "meanMs"}:
        return {"distribution": kind, "meanMs": _number(body["meanMs"], "delay.meanMs", 0,
                                                        MAX_DELAY_MS)}
    raise bad('delay must be {"distribution": "uniform", "minMs": A, "maxMs": B} or '
              '{"distribution": "exponential", "meanMs": M}.')


@dataclasses.dataclass(frozen=True)
class FaultRule:
    """A validated rule; `body` is its JSON as listed (without hits)."""

    id: str
    match: dict[str, str]
    error: dict[str, Any] | None
    delay_ms: float
    delay: dict[str, Any] | None
    probability: float
    seed: int | None
    times: int | None

    @property
    def counted(self) -> bool:
        """Whether each evaluation must be counted in the shared database: a count limit, or a
        seeded draw whose sequence must not depend on which process draws."""
        return self.times is not None or (self.probability < 1.0 and self.seed is not None)

    def matches(self, target: dict[str, str]) -> bool:
        return all(target.get(field) == value for field, value in self.match.items())

    def fires(self, evaluation: int) -> bool:
        """Whether the `evaluation`-th matching request (from 1) draws below the probability."""
        if self.probability >= 1.0:
            return True
        return self._draw(evaluation, "fire") < self.probability

    def wait_ms(self, evaluation: int) -> float:
        """How long the `evaluation`-th firing waits before answering (or continuing)."""
        if self.delay is None:
            return self.delay_ms
        draw = self._draw(evaluation, "delay")
        if self.delay["distribution"] == "uniform":
            low, high = self.delay["minMs"], self.delay["maxMs"]
            return float(low + (high - low) * draw)
        # Exponential by inversion, capped like every other delay.
        return float(min(MAX_DELAY_MS, -self.delay["meanMs"] * math.log(1.0 - draw)))

    def _draw(self, evaluation: int, purpose: str) -> float:
        # A test's fault schedule, not a secret: a seeded generator is the point.
        if self.seed is None:
            return random.random()  # noqa: S311
        return random.Random(f"{self.seed}:{purpose}:{evaluation}").random()  # noqa: S311

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "match": dict(self.match)}
        if self.error is not None:
            out["error"] = dict(self.error)
        if self.delay is not None:
            out["delay"] = dict(self.delay)
        else:
            out["delayMs"] = self.delay_ms
        out["probability"] = self.probability
        if self.seed is not None:
            out["seed"] = self.seed
        if self.times is not None:
            out["times"] = self.times
        return out


def parse_rule(body: Any, rule_id: str) -> FaultRule:
    """A rule from its JSON (as POSTed or stored); InvalidArgument naming what is wrong."""
    if not isinstance(body, dict):
        raise bad("the body must be a JSON object.")
    unknown = sorted(set(body) - RULE_FIELDS)
    if unknown:
        raise bad(f"unknown fields {unknown}; a rule has {sorted(RULE_FIELDS - {'id'})}.")
    match = body.get("match", {})
    if not isinstance(match, dict) or set(match) - set(MATCH_FIELDS):
        raise bad(f"match must be an object with some of {list(MATCH_FIELDS)}.")
    match = {field: _text(value, f"match.{field}") for field, value in match.items()}
    error = _error(body["error"]) if body.get("error") is not None else None
    delay = _delay(body["delay"]) if body.get("delay") is not None else None
    delay_ms = _number(body.get("delayMs", 0), "delayMs", 0, MAX_DELAY_MS)
    if delay is not None and delay_ms:
        raise bad("give delayMs or delay, not both.")
    if error is None and delay is None and not delay_ms:
        raise bad("a rule needs an error, a delayMs or a delay.")
    seed = body.get("seed")
    if seed is not None:
        seed = _integer(seed, "seed", -(2**63), 2**63 - 1)
    times = body.get("times")
    if times is not None:
        times = _integer(times, "times", 1, 2**31)
    return FaultRule(id=rule_id, match=match, error=error, delay_ms=delay_ms, delay=delay,
                     probability=_number(body.get("probability", 1.0), "probability", 0.0, 1.0),
                     seed=seed, times=times)
