"""mlemu's entry points: `create_app(settings)` (Flask), module-level `app` for gunicorn, and the
command-line interface `main()` (`python app.py serve|predict ...`).

`app` is built on first access (gunicorn's `app:app` does that inside each worker), so importing
this module for the CLI neither opens the store nor loads a model.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any


def missing_module_hint(exc: ModuleNotFoundError) -> str:
    """How to fix a run with a Python that lacks mlemu's requirements (e.g. the system one)."""
    return (f"mlemu: Python module {exc.name!r} is missing from {sys.executable}. Run mlemu "
            f"with its virtualenv: `./mlemu ...` (creates .venv on first use), or `make venv` "
            f"once and then `.venv/bin/mlemu ...`.")


try:
    import click

    from cli.admin import admin as admin_cli
    from cli.client import explain as explain_cli
    from cli.client import models as models_cli
    from cli.client import versions as versions_cli
    from cli.jobs import jobs as jobs_cli
    from cli.state import prepare, snapshot_options
    from core.envvars import BOOLEAN, COUNT, DIRECTORY, FILE, FLOAT, INTEGER, Kind, SettingsError, Var
    from core.settings import SETTINGS, Settings
except ModuleNotFoundError as _missing:  # the CLI run with a Python without the requirements
    if __name__ != "__main__":
        raise
    sys.exit(missing_module_hint(_missing))

if TYPE_CHECKING:
    from flask import Flask

ROOT = Path(__file__).resolve().parent
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"


def create_app(settings: Settings | None = None, *, warm: bool = True) -> Flask:
    """A Flask app serving every protocol over one Emulator built from `settings`."""
    from flask import Flask

    from api import register_authentication, register_fallbacks
    from api.admin import bp as admin_bp
    from api.controls_hook import register_controls
    from api.health import bp as health_bp
    from api.management import BLUEPRINTS as management_bps
    from api.metrics import bp as metrics_bp
    from api.unimplemented import register_unimplemented
    from api.vertex_api import register_vertex_api, register_vertex_unimplemented
    from boot import build_emulator, configure_logging
    from console import register as register_console
    from observability.http import ObservedApp
    from protocols.aiplatform import PredictFastPath
    from protocols.aiplatform import bp as aiplatform_bp
    from protocols.grps import bp as grps_bp
    from protocols.tfserving import bp as tfserving_bp
    from protocols.v2 import bp as v2_bp
    from protocols.vertex_fastpath import VertexPredictFastPath

    settings = settings or Settings.from_env()
    configure_logging(settings)
    flask_app = Flask("mlemu")
    flask_app.json.sort_keys = False  # type: ignore[attr-defined]
    # werkzeug answers `/v2/models//infer` with an HTML 308 to `/v2/models/infer` (merge_slashes):
    # a path is matched as sent, and one with an empty segment is a JSON 404 like any unknown path.
    flask_app.url_map.merge_slashes = False
    flask_app.extensions["mlemu"] = build_emulator(settings, warm=warm)
    if settings.vertex is not None:  # first: Vertex AI's routes win over any route they shadow
        from protocols.vertex import make_blueprint as vertex_blueprint

        flask_app.register_blueprint(vertex_blueprint(settings))
    for bp in (health_bp, metrics_bp, aiplatform_bp, tfserving_bp, *management_bps, v2_bp,
               grps_bp, admin_bp):
        flask_app.register_blueprint(bp)
    register_vertex_api(flask_app)  # Vertex AI (docs/vertex.md)
    register_console(flask_app)  # /console/ unless MLEMU_CONSOLE=false
    register_authentication(flask_app)
    register_controls(flask_app)  # after authentication: a bad credential is 401 first
    register_fallbacks(flask_app)
    register_unimplemented(flask_app)  # 501 for whatever ml v1 method nothing above serves
    register_vertex_unimplemented(flask_app)  # last: 501 for the Vertex AI methods not served
    # Every request is counted, access-logged and journaled once: Flask's by this middleware...
    emu, vertex = flask_app.extensions["mlemu"], settings.vertex
    routes = {vertex.predict_route: "predict", vertex.health_route: "health"} if vertex else {}
    observed = ObservedApp(flask_app.wsgi_app, emu.instruments, access=settings.access_log_on,
                           vertex_routes=routes, journal=emu.controls.record,
                           body_limit=emu.controls.body_limit)
    flask_app.wsgi_app = observed  # type: ignore[method-assign]
    # ...and outermost, plain :predict requests (ml v1's, Vertex AI's endpoints) are served before
    # Flask's per-request machinery (same steps), counted and logged through its begin/end.
    for fast_path in (PredictFastPath, VertexPredictFastPath):
        flask_app.wsgi_app = fast_path(flask_app.wsgi_app, emu, observed)  # type: ignore[method-assign]
    return flask_app


#: What create_app imports. gunicorn's master imports them before forking (import_app_modules),
#: so each worker starts with them loaded and shares their memory.
APP_MODULES = ("flask", "api", "api.admin", "api.controls_hook", "api.health", "api.management",
               "api.metrics", "api.unimplemented", "boot", "console", "emulator",
               "observability.http", "observability.logs", "protocols.aiplatform", "protocols.grps",
               "protocols.tfserving", "protocols.v2", "api.vertex_api", "protocols.vertex_fastpath")


def import_app_modules() -> None:
    """Import the app's modules without building it: nothing is opened and no thread starts
    (tests/predictors/test_preload.py checks), so this is safe before a fork."""
    import importlib

    for name in APP_MODULES:
        importlib.import_module(name)


def __getattr__(name: str) -> Any:
    if name == "app":  # gunicorn's app:app, built once per worker
        globals()["app"] = created = create_app()
        return created
    raise AttributeError(name)


class BadSetting(click.ClickException):
    exit_code = 2  # click's own status for a bad flag value


class _Commands(click.Group):
    """mlemu's command group: a bad variable (SettingsError, which names it) fails any command with
    that one line, not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SettingsError as exc:
            raise BadSetting(str(exc)) from None


@click.group(cls=_Commands)
def main() -> None:
    """mlemu: a local emulator of Google Cloud AI Platform Prediction."""


main.add_command(models_cli)  # `models create|list`, talking to a running server
main.add_command(versions_cli)  # `versions create|list|set-default|delete`
main.add_command(explain_cli)  # `explain --model M [--version V] --json-instances F`
main.add_command(jobs_cli)  # `jobs submit prediction|describe|list|cancel`
main.add_command(admin_cli)  # `admin reset|snapshot|faults|timing|requests` (docs/controls.md)


def _click_type(kind: Kind) -> click.ParamType:
    """A setting's kind as click's type for its flag (click checks the flag's value)."""
    if kind is FILE:
        return click.Path(dir_okay=False, exists=True, path_type=Path)
    if kind is DIRECTORY:
        return click.Path(file_okay=False, path_type=Path)
    if kind.choices:
        return click.Choice(kind.choices)
    types: dict[Kind, click.ParamType] = {INTEGER: click.INT, COUNT: click.INT,
                                          FLOAT: click.FLOAT, BOOLEAN: click.BOOL}
    return types.get(kind, click.STRING)


def setting_flags(table: tuple[Var, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorates a command with a flag for each setting of `table` that has one, named after its
    Settings field; unused flags are None."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for var in reversed(table):  # click lists options in the order they are applied
            if var.flag is not None:
                command = click.option(var.flag, var.field, type=_click_type(var.kind),
                                       help=var.help)(command)
        return command
    return decorate


@main.command()
@setting_flags(SETTINGS)
@snapshot_options
def serve(import_file: Path | None, export_on_exit: Path | None, **flags: Any) -> None:
    """Serve the emulator under gunicorn with deploy/gunicorn.conf.py, HTTP and gRPC."""
    settings = Settings.from_env().replace(**{k: v for k, v in flags.items() if v is not None})
    # gunicorn runs from the project folder: make relative paths mean what they meant here.
    settings = settings.replace(
        state_dir=settings.state_dir.resolve(),
        config_file=settings.config_file.resolve() if settings.config_file else None,
        iam_config=settings.iam_config.resolve() if settings.iam_config else None,
        model_roots=None if settings.model_roots is None
        else tuple(str(Path(root).resolve()) for root in settings.model_roots),
    )
    if settings.vertex is not None:
        vertex = settings.vertex
        settings = settings.replace(vertex=dataclasses.replace(
            vertex, storage_uri=_absolute(vertex.storage_uri),
            package_uris=tuple(_absolute(uri) for uri in vertex.package_uris)))
    from cli import preflight

    preflight.check_start(settings)
    if settings.grpc_port:  # the processes serving gRPC share the port: nobody else may hold it
        preflight.check_grpc_port(settings)
    prepare(settings, import_file)  # no controls of a past run; --import, if given
    from boot import QUIET_NATIVE_LOGS

    env = {**QUIET_NATIVE_LOGS, **os.environ, **settings.to_env()}
    if settings.metrics:  # every process writes its metrics here (observability/metrics.py)
        preflight.empty_metrics_dir(settings.metrics_dir)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(settings.metrics_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF), "--chdir", str(ROOT),
            "app:app"]
    settings.grps_online_path.unlink(missing_ok=True)  # grps starts offline
    if settings.grpc_processes() or export_on_exit is not None:  # gunicorn is not alone
        from cli import supervisor

        sys.exit(supervisor.serve(argv, env, ROOT, settings, export_on_exit))
    os.execve(sys.executable, argv, env)  # gunicorn's workers serve gRPC too (grpcserve/in_worker.py)


def _absolute(uri: str) -> str:
    """A local path made absolute (gunicorn changes directory); URIs unchanged."""
    return uri if "://" in uri else str(Path(uri).resolve())


@main.command()
@click.option("--model-dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="Local directory with the model file(s).")
@click.option("--json-instances", required=True, type=click.File("rb"),
              help="Newline-delimited JSON instances ('-' for stdin).")
@click.option("--framework", type=click.Choice(["SCIKIT_LEARN", "XGBOOST", "TENSORFLOW"],
                                               case_sensitive=False),
              help="Framework (detected from the model file when omitted).")
@click.option("--prediction-class", help="module.Class of a custom predictor.")
@click.option("--package-uris", help="Comma-separated packages (paths, gs:// URIs) for --prediction-class.")
def predict(model_dir: str, json_instances: Any, framework: str | None,
            prediction_class: str | None, package_uris: str | None) -> None:
    """Predict locally without a server (like `gcloud ai-platform local predict`).

    Prints one JSON prediction per line, in instance order.
    """
    import tempfile

    import predictors
    from boot import QUIET_NATIVE_LOGS
    from core import wirejson
    from core.errors import ApiError
    from registry import artifacts
    from registry.gcs import GcsCache

    for key, value in QUIET_NATIVE_LOGS.items():
        os.environ.setdefault(key, value)  # before TensorFlow's import, in this process
    instances = [wirejson.loads(line) for line in json_instances.read().splitlines() if line.strip()]
    if not instances:
        raise click.UsageError("--json-instances holds no instances.")
    try:
        with tempfile.TemporaryDirectory() as cache:
            gcs = GcsCache(Path(cache) / "gcs", Settings.from_env().storage_emulator_host)
            roots = [artifacts.unpack_package(artifacts.resolve_uri(u, gcs=gcs), Path(cache))
                     for u in (package_uris or "").split(",") if u]
            predictor, _ = predictors.load(model_dir, framework, prediction_class, roots)
            result = predictor.predict(instances)
    except ApiError as exc:
        raise click.ClickException(exc.message) from None
    for prediction in (result.tolist() if hasattr(result, "tolist") else result):
        click.echo(wirejson.dumps(prediction).decode())


@main.command("request-logs")
@click.argument("model")
@click.option("--version", "version_id", help="Only this version's rows.")
@click.option("--limit", type=int, default=100, show_default=True,
              help="The newest N rows (0: all).")
@click.option("--state-dir", type=click.Path(file_okay=False), help="Where state is kept.")
def request_logs(model: str, version_id: str | None, limit: int, state_dir: str | None) -> None:
    """Print the request-response log rows kept in the store for MODEL (a model id in the
    default project, or projects/P/models/M), one JSON object per line, oldest first.

    Rows are there when a version has a requestLoggingConfig and no BigQuery credentials were
    available (docs/observability.md, "Request-response logging").
    """
    import json

    from observability import request_log, request_log_store
    from registry import names
    from registry.store import open_store

    settings = Settings.from_env()
    if state_dir:
        settings = settings.replace(state_dir=Path(state_dir))
    model_name = model if model.startswith("projects/") else names.model_name(
        settings.default_project, model)
    store = open_store(settings.database_url, settings.state_dir)
    try:
        if store.get_model(model_name) is None:
            raise click.ClickException(f"Model {model_name} not found.")
        versions = ([f"{model_name}/versions/{version_id}"] if version_id
                    else [v.name for v in store.list_versions(model_name)])
        for row in request_log_store.newest(store, versions, limit):  # one row read at a time
            click.echo(json.dumps({field: row.get(field) for field in request_log.FIELDS}))
    finally:
        store.close()


if __name__ == "__main__":
    try:
        main()
    except ModuleNotFoundError as exc:  # a lazily imported requirement (joblib, xgboost, ...)
        sys.exit(missing_module_hint(exc))
