"""`app.py serve`'s checks before gunicorn starts: each failure is one clear line (a
click.ClickException), not a traceback from every worker that would meet it."""

from __future__ import annotations

import shutil
import socket
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


def check_grpc_port(settings: Settings) -> None:
    """Fail `serve` with one clear line when something already listens on the gRPC port (the
    servers that will share it through SO_REUSEPORT would otherwise join a stranger's
    listener): `check_port_free`."""
    try:
        check_port_free(settings.host, settings.grpc_port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {settings.host}:{settings.grpc_port}: "
                                   f"{exc.strerror or exc}") from None


def check_port_free(host: str, port: int) -> None:
    """Raise OSError (EADDRINUSE, ...) when a TCP listener on `host:port` could not be opened
    without SO_REUSEPORT, i.e. when any other program, or another mlemu's gRPC servers (which
    set SO_REUSEPORT), already listen there.

    Servers started with SO_REUSEPORT would otherwise join such a listener silently and the
    kernel would split connections between the two. SO_REUSEADDR is set as gRPC core sets it,
    so connections of a previous run left in TIME_WAIT do not count as a conflict; a socket
    bound without SO_REUSEADDR, or any listening one, does. What is left is a race: a program
    that binds the port with SO_REUSEPORT, as the same user, between this check and the gRPC
    servers' bind would share it (two mlemus started at the same instant).
    """
    for family, kind, proto, _, address in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
