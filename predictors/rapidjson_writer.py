"""rapidjson's PrettyWriter and TF Serving's number formatting, so TF Serving bodies match byte for byte.

TensorFlow Serving writes every predict, classify, regress and error body with
`rapidjson::PrettyWriter` (tensorflow_serving/util/json_tensor.cc: MakeRowFormatJsonFromTensors,
MakeColumnarFormatJsonFromTensors, MakeJsonFromClassificationResult, MakeJsonFromRegressionResult,
MakeJsonFromStatus), and quotes request values in its error messages through the same writer,
single-line arrays, cut at 256 bytes (JsonValueToDebugString). The layout rules here are
rapidjson's (include/rapidjson/prettywriter.h: PrettyPrefix, EndArray, EndObject; four-space
indent; kFormatSingleLineArray), the string escapes are rapidjson's Writer::WriteString (no
UTF-8 validation: bytes go out as they are), doubles are rapidjson's Grisu2 + Prettify
(include/rapidjson/internal/dtoa.h: `1e30`, `1.5e-7`, `100.0`), and floats in tensors go through
TF Serving's WriteDecimal (`%g` first, full precision when that does not read back: `9e+06`).

Text is built as str; bytes that are not UTF-8 travel as surrogate escapes (`encode` restores them).
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

import numpy as np

INDENT = "    "
_F32 = struct.Struct("f")  # packing rounds a double to the nearest float32, as a C cast does
#: json_tensor.cc kMaxJsonDebugStringBytes
DEBUG_LIMIT = 256
_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r",
                 0x22: '\\"', 0x5C: "\\\\"})


def quote(text: str) -> str:
    """A JSON string as rapidjson's Writer::WriteString writes it."""
    return '"' + text.translate(_ESCAPES) + '"'


def text_of(raw: bytes) -> str:
    """Tensor bytes as text for the writer (not UTF-8: kept as surrogate escapes)."""
    return raw.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def rapidjson_double(value: float) -> str | None:
    """rapidjson Writer::Double (default flags): None for NaN/Infinity, which it refuses."""
    if not math.isfinite(value):
        return None
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    _, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0")
    k = int(exponent) + len(digits) - len(text)  # value = int(text) * 10**k
    length, kk = len(text), len(text) + k
    if k >= 0 and kk <= 21:
        out = text + "0" * k + ".0"
    elif 0 < kk <= 21:
        out = text[:kk] + "." + text[kk:]
    elif -6 < kk <= 0:
        out = "0." + "0" * -kk + text
    elif length == 1:
        out = f"{text}e{kk - 1}"
    else:
        out = f"{text[0]}.{text[1:]}e{kk - 1}"
    return ("-" if value < 0 else "") + out


def write_decimal(value: float, float32: bool) -> str:
    """TF Serving's WriteDecimal: absl::StrCat's six digits, else max_digits10; whole numbers get .0."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    text = f"{value:g}"
    back = _F32.unpack(_F32.pack(float(text)))[0] if float32 else float(text)
    if back != value:
        text = f"{value:.{9 if float32 else 17}g}"
    if "." not in text and "e" not in text:
        text += ".0"
    return text


#: Arrays of fewer values are written value by value (write_decimals).
FEW = 32


def write_decimals(values: Any, float32: bool) -> list[str]:
    """write_decimal of every value of a float array, in one go: the same texts, faster than value by value.

    The per-value steps run over the whole array: one `%` of a format string of n `%g`s (what
    f"{v:g}" gives, without a Python call per value), numpy reading the texts back, the ones
    that do not read back as the same value (as float32 when `float32`) formatted again with
    max_digits10 the same way, then `.0` for whole numbers. NaN and Infinity are rare: such
    arrays are written value by value, as are arrays of fewer than FEW values (the numpy steps cost about
    as much as 10 values written one by one).
    """
    doubles = np.asarray(values, dtype=np.float64).reshape(-1)
    if doubles.size < FEW or not np.isfinite(doubles).all():
        return [write_decimal(v, float32) for v in doubles.tolist()]
    numbers = tuple(doubles.tolist())
    texts = _formatted("%g", numbers)
    back = np.array(texts, dtype=np.float64)
    with np.errstate(over="ignore"):  # as _F32.pack would not: %g of a float32 stays in range
        same = back.astype(np.float32) == doubles.astype(np.float32) if float32 else back == doubles
    if not same.all():
        again = np.flatnonzero(~same).tolist()
        precise = _formatted("%.9g" if float32 else "%.17g", tuple(numbers[i] for i in again))
        for i, text in zip(again, precise, strict=True):
            texts[i] = text
    return [t if "." in t or "e" in t else t + ".0" for t in texts]


def _formatted(spec: str, numbers: tuple[float, ...]) -> list[str]:
    """[spec % v for v in numbers], by one `%` (no value's text holds a comma)."""
    return ((spec + ",") * len(numbers))[:-1].__mod__(numbers).split(",") if numbers else []


class PrettyWriter:
    """rapidjson::PrettyWriter's output rules; `limit` makes it JsonWriterWithLimit (stops when full)."""

    def __init__(self, limit: int | None = None) -> None:
        self.parts: list[str] = []
        self._size = 0
        self._levels: list[list[Any]] = []  # [in_array, value_count]
        self.single_line_arrays = False
        self._limit = limit

    def _put(self, text: str) -> None:
        self.parts.append(text)
        self._size += len(text)

    def _room(self) -> bool:
        return self._limit is None or self._size < self._limit

    def _prefix(self) -> None:
        if not self._levels:
            return
        level = self._levels[-1]
        if level[0]:
            if level[1] > 0:
                self._put(", " if self.single_line_arrays else ",")
            if not self.single_line_arrays:
                self._put("\n" + INDENT * len(self._levels))
        else:
            if level[1] > 0:
                self._put(",\n" if level[1] % 2 == 0 else ": ")
            else:
                self._put("\n")
            if level[1] % 2 == 0:
                self._put(INDENT * len(self._levels))
        level[1] += 1

    def value(self, text: str) -> bool:
        """A scalar already in JSON form (number, true/false/null, or a quoted string)."""
        if not self._room():
            return False
        self._prefix()
        self._put(text)
        return True

    def values(self, texts: list[str]) -> None:
        """value() for each of `texts`, in one go (an array's row of scalars; no limit)."""
        self.value(texts[0])
        if len(texts) > 1:
            sep = ", " if self.single_line_arrays else ",\n" + INDENT * len(self._levels)
            self._put(sep + sep.join(texts[1:]))
            self._levels[-1][1] += len(texts) - 1

    def key(self, name: str) -> bool:
        return self.value(quote(name))

    def start(self, array: bool) -> bool:
        if not self._room():
            return False
        self._prefix()
        self._put("[" if array else "{")
        self._levels.append([array, 0])
        return True

    def end(self) -> bool:
        if not self._room():
            return False
        array, count = self._levels.pop()
        if count and not (array and self.single_line_arrays):
            self._put("\n" + INDENT * len(self._levels))
        self._put("]" if array else "}")
        return True

    def text(self) -> str:
        return "".join(self.parts)


def _scalar_json(value: Any) -> str | None:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return rapidjson_double(value)
    return quote(str(value))


def debug_string(value: Any) -> str:
    """json_tensor.cc JsonValueToDebugString: the value re-written, arrays on one line, cut near 256."""
    writer = PrettyWriter(limit=DEBUG_LIMIT)
    writer.single_line_arrays = True
    # Iterative walk (the value may be nested far deeper than Python's recursion limit).
    stack: list[Any] = [("value", value)]
    while stack:
        kind, item = stack.pop()
        if kind == "end":
            ok = writer.end()
        elif kind == "key":
            ok = writer.key(item)
        elif isinstance(item, (list, dict)):
            ok = writer.start(isinstance(item, list))
            stack.append(("end", None))
            pairs = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            children: list[Any] = []
            for name, child in pairs:
                if name is not None:
                    children.append(("key", name))
                children.append(("value", child))
            stack.extend(reversed(children))
        else:
            text = _scalar_json(item)
            ok = text is not None and writer.value(text)
        if not ok:
            break
    return writer.text()
