"""List requests: `filter` expressions and `pageSize`/`pageToken` paging, over resource JSON.

Filters follow the Google list-filter syntax (AIP-160) in the subset the ml v1 list methods need:
`field = value`, `!=`, `:` (has: a map key, a list member, a substring), `<`, `>`, `<=`, `>=`,
`AND` (or a space), `OR`, `NOT` / `-`, parentheses, quoted or bare values, and dotted paths into
the resource's JSON such as `labels.team = ds` or `metadata.operationType = CREATE_VERSION`.
`AND` binds tighter than `OR`; a field the resource kind does not have is an INVALID_ARGUMENT.

Page tokens are opaque to clients: the name of the last resource returned plus a digest of the
filter, so a token is only valid with the filter it was issued for. Results are in name order.
Page sizes default to 20 and are capped at 100, as the ml v1 reference says for models.list and
versions.list.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from core.errors import InvalidArgument

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
#: Deepest nesting of NOT / `-` / parentheses a filter may use (both its parse and its predicate
#: recurse per level; Python's own limit would answer 500).
MAX_FILTER_DEPTH = 64

_TOKEN = re.compile(r'\s*(\(|\)|!=|<=|>=|=|<|>|:|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[^\s()=!<>:"\']+)')
_OPS = {"=", "!=", ":", "<", ">", "<=", ">="}
Predicate = Callable[[dict[str, Any]], bool]


def _bad(spec: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"Invalid filter {spec!r}: {why}")


def _tokens(spec: str) -> list[str]:
    out, pos = [], 0
    while pos < len(spec):
        if spec[pos:].strip() == "":
            break
        match = _TOKEN.match(spec, pos)
        if match is None:
            raise _bad(spec, f"unexpected character at position {pos}.")
        out.append(match.group(1))
        pos = match.end()
    return out


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "\"'":
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    return token


def _lookup(resource: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(resource, dict) or part not in resource:
            return None
        resource = resource[part]
    return resource


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _compare(actual: Any, op: str, wanted: str) -> bool:
    if op == ":":
        if wanted == "*":
            return actual not in (None, "", [], {})
        if isinstance(actual, dict):
            return wanted in actual
        if isinstance(actual, list):
            return wanted in [_text(v) for v in actual]
        return wanted.lower() in _text(actual).lower()
    text = _text(actual)
    if op == "=":
        return text == wanted
    if op == "!=":
        return text != wanted
    try:  # numbers compare as numbers, everything else (timestamps too) as text
        a: Any = float(text)
        b: Any = float(wanted)
    except ValueError:
        a, b = text, wanted
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


class _Parser:
    def __init__(self, spec: str, fields: Iterable[str]) -> None:
        self.spec = spec
        self.fields = set(fields)
        self.tokens = _tokens(spec)
        self.pos = 0
        self.depth = 0

    def nest(self) -> None:
        """One more level of NOT or parentheses; bounded, as the parse and the predicate recurse."""
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise _bad(self.spec, f"it nests more than {MAX_FILTER_DEPTH} levels deep.")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise _bad(self.spec, "it ends too early.")
        self.pos += 1
        return token

    def parse(self) -> Predicate:
        pred = self.disjunction()
        if self.peek() is not None:
            raise _bad(self.spec, f"unexpected {self.peek()!r}.")
        return pred

    def disjunction(self) -> Predicate:
        parts = [self.conjunction()]
        while self.peek() == "OR":
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda r: any(p(r) for p in parts))

    def conjunction(self) -> Predicate:
        parts = [self.negation()]
        while self.peek() not in (None, "OR", ")"):
            if self.peek() == "AND":
                self.take()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (lambda r: all(p(r) for p in parts))

    def negation(self) -> Predicate:
        word = self.peek()
        if word == "NOT" or (word is not None and word.startswith("-") and len(word) > 1):
            if word == "NOT":
                self.take()
            else:
                self.tokens[self.pos] = word[1:]
            self.nest()
            inner = self.negation()
            self.depth -= 1
            return lambda r: not inner(r)
        return self.atom()

    def atom(self) -> Predicate:
        word = self.take()
        if word == "(":
            self.nest()
            inner = self.disjunction()
            self.depth -= 1
            if self.take() != ")":
                raise _bad(self.spec, "unbalanced parentheses.")
            return inner
        path = word.split(".")
        if path[0] not in self.fields:
            raise _bad(self.spec, f"unknown field {path[0]!r}; filterable fields are "
                                  f"{', '.join(sorted(self.fields))}.")
        op = self.take()
        if op not in _OPS:
            raise _bad(self.spec, f"expected an operator after {word!r}, got {op!r}.")
        value = _unquote(self.take())
        return lambda r: _compare(_lookup(r, path), op, value)


def compile_filter(spec: str | None, fields: Iterable[str]) -> Predicate:
    """A predicate over a resource's JSON; `fields` are the top-level names it may use."""
    if not spec or not spec.strip():
        return lambda r: True
    return _Parser(spec, fields).parse()


def page_size(value: int | None) -> int:
    if value is None or value == 0:
        return DEFAULT_PAGE_SIZE
    if value < 0:
        raise InvalidArgument(f"Field: page_size Error: pageSize must not be negative, got {value}.")
    return min(value, MAX_PAGE_SIZE)


def _digest(spec: str | None) -> str:
    return hashlib.sha256((spec or "").encode()).hexdigest()[:12]


def paginate(items: list[dict[str, Any]], size: int | None, token: str | None,
             spec: str | None, key: str = "name") -> tuple[list[dict[str, Any]], str | None]:
    """One page of `items` (sorted by `key`, their name or id) and the token for the next one
    (None at the end)."""
    after = ""
    if token:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
            after, digest = str(data["after"]), str(data["filter"])
        except (ValueError, KeyError, TypeError, RecursionError):  # a token of deep JSON too
            raise InvalidArgument("Field: page_token Error: Invalid page token.") from None
        if digest != _digest(spec):
            raise InvalidArgument(
                "Field: page_token Error: The page token was issued for a different filter."
            )
    limit = page_size(size)
    rest = [item for item in items if item[key] > after]
    page = rest[:limit]
    if len(rest) <= limit:
        return page, None
    raw = json.dumps({"after": page[-1][key], "filter": _digest(spec)}).encode()
    return page, base64.urlsafe_b64encode(raw).decode().rstrip("=")


def list_response(items: list[dict[str, Any]], key: str, fields: Iterable[str], *,
                  filter: str | None, page_size: int | None,
                  page_token: str | None, sort_key: str = "name") -> dict[str, Any]:
    """A list method's body: `{key: [...], "nextPageToken": ...}`, or `{}` when nothing matches
    (the ml v1 reference: "the list request returns an empty response body: {}")."""
    predicate = compile_filter(filter, fields)
    page, token = paginate([i for i in items if predicate(i)], page_size, page_token, filter,
                           sort_key)
    body: dict[str, Any] = {}
    if page:
        body[key] = page
    if token:
        body["nextPageToken"] = token
    return body
