"""Typed environment variables: the kinds of value a setting holds, one-line declarations (Var)
and reading / writing a table of them. settings.py declares mlemu's table and is the only module
that reads os.environ; this module only parses the text it is given.

Errors name the variable and use click's wording ("'abc' is not a valid integer"), so a bad
variable and a bad flag of `app.py serve` read alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """A variable whose value is not of its setting's kind; the message names the variable."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """What one kind of setting holds: how its variable's text is read, and written back."""

    name: str
    #: The text to the value; raises ValueError saying what is wrong with the text.
    parse: Callable[[str], Any]
    write: Callable[[Any], str] = str
    #: An enumeration's values (matched case-insensitively in variables).
    choices: tuple[str, ...] = ()

    def read(self, variable: str, text: str) -> Any:
        try:
            return self.parse(text)
        except ValueError as exc:
            raise SettingsError(f"{variable}: {exc}") from None


def _number(convert: Callable[[str], Any], noun: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return convert(text)
        except ValueError:  # click's wording, so a variable and a flag fail alike
            raise ValueError(f"{text!r} is not a valid {noun}") from None
    return parse


def _count(text: str) -> int | None:
    """An explicit count; 0 (or less) means "size it from the CPUs", as unset does."""
    number: int = _number(int, "integer")(text)
    return number if number > 0 else None


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _boolean(text: str) -> bool:
    word = text.strip().lower()
    if word not in _TRUE | _FALSE:
        raise ValueError(f"{text!r} is not a valid boolean")
    return word in _TRUE


def choice(*choices: str) -> Kind:
    """An enumeration; a variable's value is lower-cased before it is matched."""
    def parse(text: str) -> str:
        if text.strip().lower() not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(map(repr, choices))}")
        return text.strip().lower()
    return Kind("choice", parse, choices=choices)


def subset(*choices: str, every: str = "all", no: str = "none") -> Kind:
    """A comma-separated set of some of `choices` (case-insensitive; `every` names them all,
    `no` or nothing none), held as a tuple in the order of `choices`; an unknown item is named."""
    def parse(text: str) -> tuple[str, ...]:
        chosen: set[str] = set()
        for item in (word.strip().lower() for word in text.split(",")):
            if item == every:
                chosen.update(choices)
            elif item in choices:
                chosen.add(item)
            elif item and item != no:
                known = ", ".join(map(repr, (*choices, every, no)))
                raise ValueError(f"{item!r} is not one of {known}")
        return tuple(c for c in choices if c in chosen)
    return Kind("subset", parse, ",".join, choices=choices)


TEXT = Kind("text", str)
INTEGER = Kind("integer", _number(int, "integer"))
FLOAT = Kind("float", _number(float, "float"))
BOOLEAN = Kind("boolean", _boolean, lambda value: "true" if value else "false")
COUNT = Kind("count", _count)  # an integer; unset or 0 is None
FILE = Kind("file", Path)
DIRECTORY = Kind("directory", Path)
#: Comma-separated text (blanks dropped) as a tuple; an empty tuple is written as "" (unset).
LIST = Kind("list", lambda text: tuple(item.strip() for item in text.split(",") if item.strip()),
            ",".join)


@dataclasses.dataclass(frozen=True)
class Var:
    """One setting: the Settings field it fills and the variables it is read from (the first one
    set wins; to_env writes the first). `flag` and `help` make it a flag of `app.py serve`."""

    field: str
    names: tuple[str, ...]
    kind: Kind = TEXT
    flag: str | None = None
    help: str | None = None


def read(table: tuple[Var, ...], get: Callable[[str], str | None]) -> dict[str, Any]:
    """The fields of `table` whose variables are set (empty counts as unset), parsed."""
    values: dict[str, Any] = {}
    for var in table:
        for name in var.names:
            if text := get(name):
                values[var.field] = var.kind.read(name, text)
                break
    return values


def write(table: tuple[Var, ...], values: object) -> dict[str, str]:
    """The inverse of read: each field of `values` that is not None under its first variable."""
    return {var.names[0]: var.kind.write(value) for var in table
            if (value := getattr(values, var.field)) is not None}
