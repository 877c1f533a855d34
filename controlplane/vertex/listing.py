"""Vertex AI's list conventions over the shared filter and paging rules (controlplane/listing.py):
filters name fields in snake_case (`display_name="iris"`, `labels.team="a"`), `orderBy` takes
fields with an optional ` desc`, update masks take snake or camel case."""

from __future__ import annotations

import re
from typing import Any

from controlplane import listing
from core.errors import InvalidArgument

_QUOTED = re.compile(r'("(?:[^"\\]|\\.)*")')
_SNAKE = re.compile(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_filter(spec: str | None) -> str | None:
    """The filter with its field names in the JSON's camelCase (quoted values left alone)."""
    if not spec:
        return spec
    parts = _QUOTED.split(spec)
    return "".join(part if i % 2 else _SNAKE.sub(lambda m: camel(m[1]), part)
                   for i, part in enumerate(parts))


def _order(items: list[dict[str, Any]], order_by: str | None) -> list[dict[str, Any]]:
    if not order_by:
        return items
    for clause in reversed([c.strip() for c in order_by.split(",") if c.strip()]):
        field, _, direction = clause.partition(" ")
        if direction.strip() not in ("", "asc", "desc"):
            raise InvalidArgument(f"Invalid orderBy clause {clause!r}.")
        key = camel(field)
        items = sorted(items, key=lambda item: str(item.get(key, "")),
                       reverse=direction.strip() == "desc")
    return items


#: Fields a Vertex list filter may name (Model, Endpoint, Operation JSON).
FILTERABLE = ("name", "displayName", "description", "labels", "versionId", "versionAliases",
              "createTime", "updateTime", "done", "deployedModels", "artifactUri",
              "containerSpec", "versionDescription", "metadata")


def list_response(items: list[dict[str, Any]], collection: str, *, key: str = "name",
                  filter: str | None = None, page_size: int | None = None,
                  page_token: str | None = None, order_by: str | None = None) -> dict[str, Any]:
    """`{collection: [...], "nextPageToken": ...}`: matching items, ordered, one page."""
    predicate = listing.compile_filter(camel_filter(filter), FILTERABLE)
    matching = [item for item in items if predicate(item)]
    if order_by:
        # Ordered pages are cut by position: the token holds the next item's index.
        ordered = _order(matching, order_by)
        start = _offset(page_token)
        size = listing.page_size(page_size)
        body: dict[str, Any] = {collection: ordered[start:start + size]} if ordered else {}
        if start + size < len(ordered):
            body["nextPageToken"] = f"o{start + size}"
        return body
    page, token = listing.paginate(matching, page_size, page_token, filter, key)
    body = {collection: page} if page else {}
    if token:
        body["nextPageToken"] = token
    return body


def _offset(token: str | None) -> int:
    if not token:
        return 0
    if not token.startswith("o") or not token[1:].isdigit():
        raise InvalidArgument("Invalid page token.")
    return int(token[1:])


def mask_fields(mask: str | None, allowed: tuple[str, ...]) -> list[str]:
    if not mask:
        raise InvalidArgument("update_mask is required.")
    fields = [camel(part.strip()) for part in mask.split(",") if part.strip()]
    bad = [f for f in fields if f not in allowed]
    if bad:
        raise InvalidArgument(f"Unsupported update_mask path(s): {', '.join(bad)}. Updatable: "
                              f"{', '.join(allowed)}.")
    return fields
