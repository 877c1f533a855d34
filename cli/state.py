"""What `serve` does to the state directory around a run: before it (after cli/preflight.py's
checks), clear the previous run's controls and restore `--import`'s archive; after it, write
`--export-on-exit`'s (admin/snapshot.py; docs/controls.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from core.settings import Settings


def prepare(settings: Settings, import_file: Path | None) -> None:
    """Before any server process starts: the controls of the previous run (fault and timing
    rules, journal and its settings: they belong to one run) cleared, then `--import`'s archive
    restored, if given."""
    from controls import Controls

    settings.state_dir.mkdir(parents=True, exist_ok=True)
    controls = Controls(settings.state_dir)
    controls.reset()
    controls.db.close()
    snapshot_file(settings, import_file, restore=True)


def snapshot_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`serve`'s --import FILE and --export-on-exit FILE."""
    command = click.option(
        "--export-on-exit", type=click.Path(dir_okay=False, path_type=Path),
        help="Write a snapshot archive of the state here when the server stops.")(command)
    return click.option(
        "--import", "import_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="Restore this snapshot archive (GET /_mlemu/snapshot) before serving.")(command)


def snapshot_file(settings: Settings, path: Path | None, *, restore: bool) -> None:
    """`serve --import` / `--export-on-exit`: an archive in or out of the state directly, with
    no server running (admin/snapshot.py); nothing when `path` is None."""
    if path is None:
        return
    from admin.snapshot import export_state, restore_state
    from core.errors import ApiError
    from registry.store import open_store

    store = open_store(settings.database_url, settings.state_dir)
    try:
        if restore:
            restore_state(store, settings.state_dir, path.read_bytes())
        else:
            path.write_bytes(export_state(store, settings.state_dir))
            print(f"mlemu: wrote the state to {path}", file=sys.stderr)
    except ApiError as exc:
        raise click.ClickException(f"{path}: {exc.message}") from None
    finally:
        store.close()
