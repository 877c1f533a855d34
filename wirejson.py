"""JSON for the wire: orjson on the fast path, the standard library where orjson is too strict.

Two places where plain orjson would be wrong:
- Requests may carry the non-standard tokens NaN, Infinity and -Infinity (AI Platform's XGBoost
  docs tell users to send NaN for a missing value); orjson rejects them, json.loads accepts them.
- orjson writes a non-finite float as `null`, silently turning NaN into "missing". Whenever the
  fast output contains `null` we re-encode with the standard library, which writes NaN/Infinity
  like TensorFlow Serving and AI Platform's Python servers do. `null` is rare in predictions, so
  the check is nearly free.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_ORJSON_OPTS = orjson.OPT_SERIALIZE_NUMPY


class DecodeError(ValueError):
    """The body is not JSON (message says where)."""


def loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(str(exc)) from None
    except RecursionError:
        raise DecodeError("JSON nesting is too deep") from None


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
        out = orjson.dumps(obj, default=_default, option=_ORJSON_OPTS)
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
