"""`mlemu admin ...`: the emulator's controls (/_mlemu/, docs/controls.md) from the command line.

  mlemu admin reset [--project P]
  mlemu admin snapshot export FILE | import FILE
  mlemu admin faults list | add RULE_JSON | delete ID | clear
  mlemu admin timing list | set RULE_JSON | clear [--operation-type T]
  mlemu admin requests [--filter key=value ...] [--since T] [--limit N] | requests clear

Every verb takes --url (default http://127.0.0.1:8080) and --token (a bearer token when the
server enforces IAM: the caller needs `mlemu.admin`). Answers are printed as JSON.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

DEFAULT_URL = "http://127.0.0.1:8080"


def _call(ctx: click.Context, method: str, path: str, *, json_body: Any = None,
          data: bytes | None = None, params: dict[str, str] | None = None) -> Any:
    import requests  # not at import time: `serve` starts faster without it

    url, token = ctx.obj["url"], ctx.obj["token"]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        resp = requests.request(method, f"{url}/_mlemu/{path}", json=json_body, data=data,
                                params=params, headers=headers, timeout=300)
    except requests.RequestException as exc:
        raise click.ClickException(f"Cannot reach mlemu at {url}: {exc}") from None
    if resp.status_code != 200:
        try:
            message = resp.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = resp.text[:500]
        raise click.ClickException(f"{resp.status_code}: {message}")
    return resp.content if resp.headers.get("Content-Type", "").startswith(
        "application/gzip") else resp.json()


def _echo(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


def _rule(text: str) -> Any:
    """A rule given as JSON text, or @FILE for a file holding it."""
    try:
        return json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"not JSON: {exc}") from None


def _command(group: click.Group, name: str) -> Callable[[Callable[..., Any]], Any]:
    """A subcommand of `group` that gets the click context first."""
    def decorate(function: Callable[..., Any]) -> Any:
        @functools.wraps(function)
        @click.pass_context
        def run(ctx: click.Context, *args: Any, **kwargs: Any) -> Any:
            return function(ctx, *args, **kwargs)
        return group.command(name)(run)
    return decorate


@click.group()
@click.option("--url", default=DEFAULT_URL, show_default=True, help="The mlemu server.")
@click.option("--token", default=None, help="Bearer token (IAM enforce: needs mlemu.admin).")
@click.pass_context
def admin(ctx: click.Context, url: str, token: str | None) -> None:
    """The emulator's controls: reset, snapshots, faults, timing, the request journal."""
    ctx.obj = {"url": url.rstrip("/"), "token": token}


@admin.command()
@click.option("--project", default=None, help="Reset only this project.")
@click.pass_context
def reset(ctx: click.Context, project: str | None) -> None:
    """Back to the starting state (the bootstrap file's models, loaded)."""
    _call(ctx, "POST", "reset", json_body={"project": project} if project else {})
    click.echo(f"Reset {'project ' + project if project else 'the emulator'}.")


@admin.group()
def snapshot() -> None:
    """Export or import the whole state as one archive."""


@_command(snapshot, "export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def snapshot_export(ctx: click.Context, file: Path) -> None:
    file.write_bytes(_call(ctx, "GET", "snapshot"))
    click.echo(f"Wrote {file}.")


@_command(snapshot, "import")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def snapshot_import(ctx: click.Context, file: Path) -> None:
    _call(ctx, "POST", "snapshot", data=file.read_bytes())
    click.echo(f"Restored {file}.")


@admin.group()
def faults() -> None:
    """Fault and latency rules."""


@_command(faults, "list")
def faults_list(ctx: click.Context) -> None:
    _echo(_call(ctx, "GET", "faults"))


@_command(faults, "add")
@click.argument("rule")
def faults_add(ctx: click.Context, rule: str) -> None:
    """RULE: the rule as JSON, or @FILE."""
    _echo(_call(ctx, "POST", "faults", json_body=_rule(rule)))


@_command(faults, "delete")
@click.argument("rule_id")
def faults_delete(ctx: click.Context, rule_id: str) -> None:
    _call(ctx, "DELETE", f"faults/{rule_id}")


@_command(faults, "clear")
def faults_clear(ctx: click.Context) -> None:
    _call(ctx, "DELETE", "faults")


@admin.group()
def timing() -> None:
    """Timing of long-running work, per operation type."""


@_command(timing, "list")
def timing_list(ctx: click.Context) -> None:
    _echo(_call(ctx, "GET", "timing"))


@_command(timing, "set")
@click.argument("rule")
def timing_set(ctx: click.Context, rule: str) -> None:
    """RULE: {"operationType": T, "after": {...}, "fail": {...}} as JSON, or @FILE."""
    _echo(_call(ctx, "PUT", "timing", json_body=_rule(rule)))


@_command(timing, "clear")
@click.option("--operation-type", default=None, help="Only this type's rule.")
def timing_clear(ctx: click.Context, operation_type: str | None) -> None:
    _call(ctx, "DELETE", "timing",
          params={"operationType": operation_type} if operation_type else None)


@admin.group(invoke_without_command=True)
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help="protocol, method, project, model, version, status, ... (repeatable).")
@click.option("--since", default=None, help="RFC 3339 time: only requests since then.")
@click.option("--limit", type=int, default=None, help="Only the newest N.")
@click.pass_context
def requests(ctx: click.Context, filters: tuple[str, ...], since: str | None,
             limit: int | None) -> None:
    """The request journal (oldest first); `requests clear` empties it."""
    if ctx.invoked_subcommand is not None:
        return
    params = dict(item.split("=", 1) for item in filters if "=" in item)
    if len(params) != len(filters):
        raise click.BadParameter("filters are KEY=VALUE", param_hint="--filter")
    if since:
        params["since"] = since
    if limit:
        params["limit"] = str(limit)
    _echo(_call(ctx, "GET", "requests", params=params))


@_command(requests, "clear")
def requests_clear(ctx: click.Context) -> None:
    _call(ctx, "DELETE", "requests")
