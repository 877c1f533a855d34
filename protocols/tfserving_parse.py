"""TF Serving's JSON request parsing: what rapidjson accepts, and its words when it does not.

tensorflow_serving/util/json_tensor.cc ParseJson parses with rapidjson, flags
kParseIterativeFlag | kParseNanAndInfFlag | kParseStopWhenDoneFlag, so:
- an empty body is "JSON Parse error: The document is empty" (its own check, no offset);
- a syntax error is "JSON Parse error: <rapidjson's GetParseError_En> at offset: <n>";
- NaN, Inf, Infinity (signed) are numbers; anything after the first complete value is ignored;
- nesting has no depth limit (the iterative parser), so a key TF Serving never reads may hold a
  value nested 500,000 deep;
- integers beyond int64/uint64 become doubles (what orjson does too);
- strings are not checked for UTF-8 (their bytes reach string tensors as they are);
- the document must be an object: "JSON Value: <value> Is not object".
orjson takes the common case; python-rapidjson (the same rapidjson parser, with its English
messages and offsets) explains failures; documents deeper than its recursion guard, or with bytes
that are not UTF-8 (kept as surrogate escapes), are read by the small iterative reader here.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from core.errors import InvalidArgument
from predictors.rapidjson_writer import debug_string

_ERROR = re.compile(r"Parse error at offset (\d+): (.*)", re.DOTALL)
_TRAILING = "The document root must not be followed by other values."
_DEPTH = "Maximum parse recursion depth exceeded"
_NUMBER = re.compile(r"-?(?:NaN|Inf(?:inity)?|(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)")
_SPACE = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None}


def _number(token: str) -> Any:
    if "N" in token:
        return float("nan")
    if "I" in token:
        return float("-inf") if token.startswith("-") else float("inf")
    if any(c in token for c in ".eE"):
        return float(token)
    value = int(token)
    return value if -(2 ** 63) <= value < 2 ** 64 else float(value)


def _big_ints(value: Any, data: bytes) -> Any:
    """rapidjson stores integers beyond 64 bits as doubles (python-rapidjson keeps them exact),
    and refuses one past a double's range (reader.h ParseNumber: kParseErrorNumberTooBig, at the
    number's first character)."""
    stack = [value] if isinstance(value, (list, dict)) else []
    while stack:
        item = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in list(pairs):
            if isinstance(child, int) and not isinstance(child, bool) and \
                    not -(2 ** 63) <= child < 2 ** 64:
                try:
                    item[key] = float(child)
                except OverflowError:
                    raise InvalidArgument(
                        "JSON Parse error: Number too big to be stored in double. at offset: "
                        f"{_first_too_big(data)}") from None
            elif isinstance(child, (list, dict)):
                stack.append(child)
    return value


#: An integer literal too long for any double (DBL_MAX has 309 digits); the first in the text is
#: the one rapidjson stops at.
_TOO_BIG = re.compile(rb"-?[1-9][0-9]{308,}")


def _first_too_big(data: bytes) -> int:
    for match in _TOO_BIG.finditer(data):
        try:
            float(int(match.group()))
        except OverflowError:
            return match.start()
    return 0


class _Object:
    """An object being read: its members so far and the key whose value comes next."""

    def __init__(self) -> None:
        self.members: dict[str, Any] = {}
        self.key: str | None = None


def _iterative(text: str) -> Any:
    """A JSON document of any depth, without recursion (for what rapidjson found valid so far)."""
    decoder = json.JSONDecoder()
    stack: list[Any] = []  # open containers: a list, or an _Object
    pos = 0
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        char = text[pos:pos + 1]
        top = stack[-1] if stack else None
        if char == "," and top is not None:
            pos += 1
            continue
        if isinstance(top, _Object) and top.key is None and char != "}":
            key, pos = decoder.raw_decode(text, pos)
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            if not isinstance(key, str) or text[pos:pos + 1] != ":":
                raise ValueError(pos)
            top.key, pos = key, pos + 1
            continue
        if char in ("[", "{"):
            stack.append([] if char == "[" else _Object())
            pos += 1
            continue
        if char in ("]", "}") and top is not None:
            closed = stack.pop()
            value, pos = (closed.members if isinstance(closed, _Object) else closed), pos + 1
        elif char == '"':
            value, pos = decoder.raw_decode(text, pos)
        else:
            literal = next((k for k in _LITERALS if text.startswith(k, pos)), None)
            match = None if literal else _NUMBER.match(text, pos)
            if literal is not None:
                value, pos = _LITERALS[literal], pos + len(literal)
            elif match is not None:
                value, pos = _number(match.group()), match.end()
            else:
                raise ValueError(pos)
        if not stack:
            return value
        top = stack[-1]
        if isinstance(top, _Object):
            top.members[top.key or ""] = value
            top.key = None
        else:
            top.append(value)


def loads(data: bytes) -> Any:
    """Any JSON value as TF Serving's rapidjson reads it; InvalidArgument in its words."""
    if not data:
        raise InvalidArgument("JSON Parse error: The document is empty")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    # The same parser as TF Serving, for the bodies orjson refuses (its words and offsets, its
    # leniencies); loaded here so that starting a server and well-formed bodies never pay for it.
    import rapidjson

    try:
        return _big_ints(rapidjson.loads(data, number_mode=rapidjson.NM_NAN), data)
    except (rapidjson.JSONDecodeError, RecursionError) as exc:
        match = _ERROR.match(str(exc))
        offset, message = (int(match.group(1)), match.group(2)) if match else (0, str(exc))
        if message == _TRAILING:  # kParseStopWhenDoneFlag: the rest is never read
            return loads(data[:offset])
        if message.startswith(_DEPTH):
            return _read_iteratively(data)
        raise InvalidArgument(f"JSON Parse error: {message} at offset: {offset}") from None
    except UnicodeDecodeError:  # python-rapidjson checks UTF-8; TF Serving's rapidjson does not
        return _read_iteratively(data)
    except ValueError as exc:
        # python-rapidjson builds a Python int of an integer's digits, which Python refuses past
        # 4,300 of them (which answered 500). rapidjson itself reads such a number as a double, and
        # every integer that long exceeds one: reader.h's kParseErrorNumberTooBig.
        match = _ERROR.match(str(exc))
        offset = int(match.group(1)) if match else 0
        raise InvalidArgument(f"JSON Parse error: Number too big to be stored in double. at "
                              f"offset: {offset}") from None


def _read_iteratively(data: bytes) -> Any:
    """The iterative reader's document (bytes that are not UTF-8 kept as surrogate escapes)."""
    try:
        return _iterative(data.decode("utf-8", "surrogateescape"))
    except (ValueError, IndexError, TypeError) as bad:
        # Past what python-rapidjson could say: the reader's position, in rapidjson's words.
        offset = getattr(bad, "pos", bad.args[0] if bad.args and isinstance(bad.args[0], int) else 0)
        raise InvalidArgument(f"JSON Parse error: Invalid value. at offset: {offset}") from None


def loads_object(data: bytes) -> dict[str, Any]:
    """The request body: a JSON object (ParseJson's "Is not object" otherwise)."""
    body = loads(data)
    if not isinstance(body, dict):
        raise InvalidArgument(f"JSON Value: {debug_string(body)} Is not object")
    return body
