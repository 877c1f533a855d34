"""JSON for the wire: orjson on the fast path, the standard library where orjson is too strict.

Two places where plain orjson would be wrong:
- Requests may carry the non-standard tokens NaN, Infinity and -Infinity (AI Platform's XGBoost
  docs tell users to send NaN for a missing value); orjson rejects them, json.loads accepts them.
- orjson writes a non-finite float as `null`, silently turning NaN into "missing". Whenever the
  fast output contains `null` we re-encode with the standard library, which writes NaN/Infinity
  like TensorFlow Serving and AI Platform's Python servers do. `null` is rare in predictions, so
  the check is nearly free.

Strings must be Unicode: the standard library decodes a lone UTF-16 surrogate escape
(`"\\ud800"`) into a str no UTF-8 encoder accepts, which then broke every answer that included it.
`loads` refuses such input with the words of Google's JSON parser (protobuf's
json_stream_parser.cc: "Missing low surrogate.", "Invalid unicode code point."); `dumps` still
encodes a str holding one (stored before that check existed) as an escape instead of failing.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_ORJSON_OPTS = orjson.OPT_SERIALIZE_NUMPY


class DecodeError(ValueError):
    """The body is not JSON (message says where)."""


#: A \\u escape of a UTF-16 surrogate (paired or not: pairs are common, in escaped emoji).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        # Strictly: json.loads(bytes) would decode encoded surrogates (surrogatepass).
        text = data if isinstance(data, str) else data.decode(json.detect_encoding(data))
        value = json.loads(text)
    except UnicodeDecodeError:
        raise DecodeError("Encountered non UTF-8 code points.") from None
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    except RecursionError:
        raise DecodeError("JSON nesting is too deep") from None
    if _SURROGATE_ESCAPE.search(text):  # orjson refuses lone surrogates; json.loads does not
        _check_unicode(value)
    return value


def _check_unicode(value: Any) -> None:
    """Refuse a decoded value holding a lone surrogate anywhere (keys included)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                high = "\ud800" <= item[exc.start] <= "\udbff"
                raise DecodeError("Missing low surrogate." if high
                                  else "Invalid unicode code point.") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _default(obj: Any) -> Any:
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars
    if tolist is not None:
        return tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def dumps(obj: Any, *, pretty: bool = False) -> bytes:
    """Encode `obj`; non-finite floats come out as NaN / Infinity / -Infinity."""
    if not pretty:
        try:
            out = orjson.dumps(obj, default=_default, option=_ORJSON_OPTS)
        except orjson.JSONEncodeError:
            pass  # e.g. a lone surrogate: json escapes it (ensure_ascii), as it was stored
        else:
            if b"null" not in out:
                return out
    # Slow path: may hold NaN/Infinity (or a real null); json keeps them apart.
    text = json.dumps(
        obj,
        default=_default,
        allow_nan=True,
        indent=2 if pretty else None,
        separators=None if pretty else (",", ":"),
    )
    return text.encode()
