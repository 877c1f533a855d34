"""Google API response conventions shared by the ml v1 surfaces (management and :predict).

- The error object {"error": {"code", "message", "status", "details"}}.
- Standard query parameters: `alt` (json only), `prettyPrint`, `fields` (partial response),
  `$.xgafv`, `key`, `quotaUser`, `callback` are accepted; `fields` and `prettyPrint` are honoured.
"""

from __future__ import annotations

from typing import Any

from flask import Response, request

from core import wirejson
from core.errors import ApiError, InvalidArgument


def check_standard_params() -> None:
    alt = request.args.get("alt")
    if alt not in (None, "", "json"):
        raise InvalidArgument(f"Invalid value at 'alt' ({alt}): this emulator answers alt=json only.")


def parse_fields(spec: str) -> dict[str, Any]:
    """Google partial-response syntax (`a,b/c,d(e,f)`) -> a nested selection tree."""
    tree: dict[str, Any] = {}
    stack = [tree]
    path: list[str] = []
    token = ""

    def flush() -> None:
        nonlocal token
        parts = [p for p in token.strip().split("/") if p]
        node = stack[-1]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if parts:
            node.setdefault(parts[-1], {})
            path.append(parts[-1])
        token = ""

    for ch in spec:
        if ch == ",":
            flush()
        elif ch == "(":
            parts = [p for p in token.strip().split("/") if p]
            node = stack[-1]
            for part in parts:
                node = node.setdefault(part, {})
            stack.append(node)
            token = ""
        elif ch == ")":
            flush()
            if len(stack) == 1:
                raise InvalidArgument(f"Invalid field selection {spec!r}: unbalanced parentheses.")
            stack.pop()
        else:
            token += ch
    flush()
    if len(stack) != 1:
        raise InvalidArgument(f"Invalid field selection {spec!r}: unbalanced parentheses.")
    return tree


def select_fields(body: Any, tree: dict[str, Any]) -> Any:
    if not tree:
        return body
    if isinstance(body, list):
        return [select_fields(item, tree) for item in body]
    if not isinstance(body, dict):
        return body
    return {k: select_fields(body[k], sub) for k, sub in tree.items() if k in body}


def google_json_response(body: Any, status: int = 200, *,
                         pretty_default: bool = True) -> Response:
    """A success response honouring `fields` and `prettyPrint`, as Google's front end writes it.

    `prettyPrint` defaults to true (the ml v1 discovery document shipped in google-api-python-
    client, googleapiclient/discovery_cache/documents/ml.v1.json, `parameters.prettyPrint`), and
    the front end ends its JSON with a newline; :predict's own body is compact
    (`pretty_default=False`) but ends with the newline too, so curl's output never runs into
    the prompt.
    """
    fields = request.args.get("fields")
    if fields:
        body = select_fields(body, parse_fields(fields))
    pretty = request.args.get("prettyPrint", str(pretty_default)).lower() in {"true", "1"}
    return Response(google_json(body, pretty=pretty), status=status, mimetype="application/json")


def google_json(body: Any, *, pretty: bool = True) -> bytes:
    """JSON as Google's API front end sends it: pretty by default, ending with a newline."""
    return wirejson.dumps(body, pretty=pretty) + b"\n"


def google_error_response(exc: ApiError) -> Response:
    response = Response(google_json(exc.to_google_json()), status=exc.http_status,
                        mimetype="application/json")
    for key, value in exc.headers.items():
        response.headers[key] = value
    return response
