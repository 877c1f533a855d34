"""Vertex AI's `csv` batch input: a CSV file's rows as instances (no Beam here).

The rules are Vertex AI's ("Get batch predictions from a custom trained model", Input data
requirements, CSV: https://cloud.google.com/vertex-ai/docs/predictions/get-batch-predictions;
and google/cloud/aiplatform/v1/batch_prediction_job.proto, InstanceConfig.instance_type, in
googleapis/googleapis): the first line of each file is its header; every other line is one
instance, the array of its values in column order (csv input behaves as instance_type `array`);
a quoted value is a string, an unquoted one is read as a floating-point number; a value may not
hold a line break. So the row `0.1,1.2,"cat1"` is the instance `[0.1, 1.2, "cat1"]`, and that
array is the `instance` of its output line.

A row that breaks these rules (a different number of values than the header has, an unquoted
value that is not a number, a stray or unterminated quote, text that is not UTF-8) is not an
instance: it becomes one line of the job's errors file and the job goes on.
"""

from __future__ import annotations

from typing import Any

#: How much of a bad row an error message quotes.
QUOTED_CHARS = 100


def fields(line: str) -> list[tuple[str, bool]]:
    """The values of one CSV line (RFC 4180 quoting: `""` inside quotes is one quote), each with
    whether it was quoted; ValueError for a quote inside an unquoted value, text after a closing
    quote, or a quote left open (a value running onto the next line, which Vertex AI refuses)."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(line)
    while True:
        if i < n and line[i] == '"':
            value: list[str] = []
            i += 1
            while True:
                end = line.find('"', i)
                if end < 0:
                    raise ValueError("a quoted value is not closed (values may not hold line "
                                     "breaks)")
                value.append(line[i:end])
                if line.startswith('""', end):
                    value.append('"')
                    i = end + 2
                    continue
                i = end + 1
                break
            if i < n and line[i] != ",":
                raise ValueError(f"unexpected text after the closing quote of value "
                                 f"{len(out) + 1}")
            out.append(("".join(value), True))
        else:
            end = line.find(",", i)
            end = n if end < 0 else end
            text = line[i:end]
            if '"' in text:
                raise ValueError(f"value {len(out) + 1} has a quote but does not start with one")
            out.append((text, False))
            i = end
        if i >= n:
            return out
        i += 1  # the comma
        if i == n:  # a trailing comma: one more, empty, unquoted value
            out.append(("", False))
            return out


def header(line: bytes) -> list[str]:
    """The column names of a header line (a UTF-8 byte order mark, as spreadsheets write one,
    is not part of the first); ValueError if it is not a CSV line."""
    return [name for name, _ in fields(_text(line).removeprefix("\ufeff"))]


def instance(line: bytes, columns: int) -> list[Any]:
    """The instance of one data row of a file whose header has `columns` columns: quoted values
    as strings, unquoted ones as floats; ValueError saying why the row is not one."""
    text = _text(line)
    values = fields(text)
    if len(values) != columns:
        raise ValueError(f"the row has {len(values)} values but the header has {columns}")
    row: list[Any] = []
    for index, (value, quoted) in enumerate(values, 1):
        if quoted:
            row.append(value)
            continue
        try:
            row.append(float(value))
        except ValueError:
            raise ValueError(f"value {index} ({value[:QUOTED_CHARS]!r}) is not quoted, so it must "
                             "be a number (quote strings with \")") from None
    return row


def row_error(number: int, line: bytes, why: str) -> str:
    """The errors-file message of data row `number` (1 = the line after the header)."""
    shown = line[:QUOTED_CHARS].decode("utf-8", "replace")
    more = "..." if len(line) > QUOTED_CHARS else ""
    return f"CSV row {number} is not a valid instance: {why}: {shown}{more}"


def _text(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the line is not UTF-8 text") from None
