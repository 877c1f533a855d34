"""`app.py serve`'s checks before gunicorn starts: each failure is one clear line (a
click.ClickException), not a traceback from every worker that would meet it."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from core.settings import Settings


def check_start(settings: Settings) -> None:
    """Fail `serve` with one clear line when the store cannot be opened (an unreachable
    database, a bad MLEMU_DATABASE_URL) or the installed gunicorn is not one mlemu's worker was
    tested with (deploy/fence.py), before gunicorn or a gRPC process starts."""
    from core.errors import ApiError
    from deploy import fence
    from registry.store import open_store

    try:
        fence.worker_class(settings.worker_class)
        open_store(settings.database_url, settings.state_dir).close()
    except (ValueError, ApiError, fence.UntestedGunicorn) as exc:
        raise click.ClickException(exc.message if isinstance(exc, ApiError) else str(exc)) from None


def empty_metrics_dir(directory: Path) -> None:
    """An empty metrics directory, or one clear line saying why there cannot be one."""
    try:
        shutil.rmtree(directory, ignore_errors=False)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise click.ClickException(f"Cannot empty the metrics directory {directory}: "
                                   f"{exc.strerror or exc}. Make it writable, or set "
                                   "MLEMU_METRICS=false.") from None
    try:
        directory.mkdir(parents=True)
    except OSError as exc:
        raise click.ClickException(f"Cannot create the metrics directory {directory}: "
                                   f"{exc.strerror or exc}. Make it writable, or set "
                                   "MLEMU_METRICS=false.") from None
