"""Settings are declared once (settings.SETTINGS): from_env, to_env and `serve`'s flags agree, and
a bad value fails with one line naming the variable (or flag) and exit status 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import app
from core.container_settings import VERTEX_SETTINGS
from core.envvars import BOOLEAN, COUNT, FLOAT, INTEGER, SettingsError, Var, choice, read
from core.settings import SETTINGS, Settings, VertexSettings
from tests.conftest import ROOT


def test_round_trip_of_every_setting(tmp_path: Path) -> None:
    vertex = VertexSettings(health_route="/h", predict_route="/p", storage_uri="gs://b/m",
                            deployed_model_id="42", prediction_class="m.C",
                            package_uris=("gs://b/a.tar.gz", "/pkgs/b.whl"),
                            passthrough={"AIP_MODE": "PREDICTION"})
    full = Settings(state_dir=tmp_path / "state", config_file=tmp_path / "boot.yaml",
                    host="0.0.0.0", port=9000, workers=3, threads=5, max_request_bytes=10,
                    default_project="p", iam_mode="enforce", iam_config=tmp_path / "iam.yaml",
                    xgboost_nthread=0, tensorflow_threads=0, batch_max_instances=0, max_loaded_versions=0,
                    max_loaded_mb=512, ready_versions=4,
                    database_url="sqlite:///x.db",
                    grpc_port=0, grpc_workers=4, grpc_inline_ms=0.0, public_url="https://x.run.app",
                    log_level="debug",
                    extra={"MLEMU_X_FLAG": "1"}, max_message_bytes=11, grps_default_model="m-v1",
                    vertex=vertex, storage_emulator_host="http://127.0.0.1:9023",
                    beam_runner="FlinkRunner", beam_options="--flink_master=localhost:8081",
                    batch_any_framework=True, batch_runner_idle_s=30.0,
                    explain_any_framework=True, tfserving_unversioned="default",
                    header_timeout=1.5, request_timeout=2.5,
                    model_roots=("/m1", "/m2"), allowed_buckets=("b1",),
                    data_roots=("/d1",),
                    log_format="json", access_log=False, trace_project="gcp-project",
                    metrics=False, metrics_public=True, request_log_sink="store",
                    console=False, worker_class="gthread", worker_off=("pinning", "drain"),
                    request_log_max_bytes=5,
                    vertex_local_containers=True, vertex_container_commands=("python3",),
                    vertex_container_start_s=5.0, vertex_container_timeout_s=7.0,
                    vertex_max_containers=2)
    bare = VertexSettings(health_route="/h", predict_route="/p", storage_uri="/m")
    for settings in (Settings(), full, Settings(vertex=vertex, grpc_port=8081),
                     Settings(vertex=bare, grpc_port=0)):
        assert Settings.from_env(settings.to_env()) == settings
    # Every field a variable fills was set to a non-default value above, so each one round-tripped.
    assert all(getattr(full, var.field) != getattr(Settings(), var.field) for var in SETTINGS)
    assert all(getattr(vertex, var.field) != getattr(bare, var.field) for var in VERTEX_SETTINGS[3:])

    env = {"PORT": "7000", "MLEMU_WORKERS": "0", "MLEMU_IAM_MODE": "ENFORCE",
           "MLEMU_LOG_LEVEL": "Warning", "MLEMU_DATABASE_URL": "", "MLEMU_X_Y": "z"}
    settings = Settings.from_env(env)
    assert (settings.port, settings.workers, settings.iam_mode, settings.log_level,
            settings.database_url, settings.extra) == (7000, None, "enforce", "warning", None,
                                                       {"MLEMU_X_Y": "z"})
    assert Settings.from_env(settings.to_env()) == settings
    assert "MLEMU_WORKERS" not in settings.to_env() and "MLEMU_DATABASE_URL" not in settings.to_env()


def test_port_variables_in_order_and_vertex_turns_grpc_off() -> None:
    ports = {"MLEMU_PORT": "1", "AIP_HTTP_PORT": "2", "PORT": "3"}
    assert Settings.from_env(ports).port == 1
    assert Settings.from_env({**ports, "MLEMU_PORT": ""}).port == 2
    assert Settings.from_env({"PORT": "3"}).port == 3
    aip = {"AIP_HEALTH_ROUTE": "/h", "AIP_PREDICT_ROUTE": "/p", "AIP_STORAGE_URI": "/m"}
    assert Settings.from_env(aip).grpc_port == 0
    assert Settings.from_env({**aip, "MLEMU_GRPC_PORT": "8081"}).grpc_port == 8081
    assert Settings.from_env({}).grpc_port == 8081


@pytest.mark.parametrize(("env", "message"), [
    ({"MLEMU_PORT": "abc"}, "MLEMU_PORT: 'abc' is not a valid integer"),
    # the variable named is the one that was read, not the first of its setting
    ({"PORT": "80a"}, "PORT: '80a' is not a valid integer"),
    ({"MLEMU_THREADS": "many"}, "MLEMU_THREADS: 'many' is not a valid integer"),
    ({"MLEMU_MAX_REQUEST_BYTES": "1.5"}, "MLEMU_MAX_REQUEST_BYTES: '1.5' is not a valid integer"),
    ({"MLEMU_IAM_MODE": "strict"}, "MLEMU_IAM_MODE: 'strict' is not one of 'off', 'enforce'"),
    ({"MLEMU_LOG_LEVEL": "loud"}, "MLEMU_LOG_LEVEL: 'loud' is not one of 'debug', 'info', "
                                  "'warning', 'error', 'critical'"),
    ({"MLEMU_WORKER_OFF": "drain,pining"}, "MLEMU_WORKER_OFF: 'pining' is not one of 'pinning', "
                                          "'board', 'socket', 'drain', 'all', 'none'"),
])
def test_bad_variable_names_itself(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)
    assert str(caught.value) == message


#: Kinds no setting uses yet, read and flagged by the same code as SETTINGS.
TABLE = (Var("ratio", ("X_RATIO",), FLOAT, "--ratio"), Var("on", ("X_ON",), BOOLEAN, "--on"),
         Var("n", ("X_N",), COUNT, "--n"), Var("mode", ("X_MODE",), choice("a", "b"), "--mode"),
         Var("port", ("X_PORT",), INTEGER, "--port"))


def test_every_kind_parses_and_rejects() -> None:
    env = {"X_RATIO": "0.5", "X_ON": "Yes", "X_N": "0", "X_MODE": "B", "X_PORT": "8"}
    assert read(TABLE, env.get) == {"ratio": 0.5, "on": True, "n": None, "mode": "b", "port": 8}
    assert read(TABLE, {"X_ON": "off", "X_N": "4"}.get) == {"on": False, "n": 4}
    for name, text, problem in [("X_RATIO", "half", "is not a valid float"),
                                ("X_ON", "maybe", "is not a valid boolean"),
                                ("X_N", "4.0", "is not a valid integer"),
                                ("X_MODE", "c", "is not one of 'a', 'b'")]:
        with pytest.raises(SettingsError, match=re.escape(f"{name}: {text!r} {problem}")):
            read(TABLE, {name: text}.get)


def test_flags_of_every_kind_reject_bad_values() -> None:
    @click.command()
    @app.setting_flags(TABLE)
    def command(**flags: Any) -> None:
        click.echo(repr(sorted(flags.items())))

    runner = CliRunner()
    good = runner.invoke(command, ["--ratio", "0.5", "--on", "yes", "--mode", "a"])
    assert good.exit_code == 0, good.output
    assert good.output.strip() == repr([("mode", "a"), ("n", None), ("on", True), ("port", None),
                                        ("ratio", 0.5)])
    for args, problem in [(["--ratio", "half"], "'half' is not a valid float"),
                          (["--on", "maybe"], "'maybe' is not a valid boolean"),
                          (["--n", "x"], "'x' is not a valid integer"),
                          (["--mode", "c"], "'c' is not one of 'a', 'b'")]:
        result = runner.invoke(command, args)
        assert result.exit_code == 2 and args[0] in result.output and problem in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(("args", "problem"), [
    (["--port", "abc"], "Invalid value for '--port': 'abc' is not a valid integer"),
    (["--workers", "2.5"], "Invalid value for '--workers': '2.5' is not a valid integer"),
    (["--iam-mode", "strict"], "Invalid value for '--iam-mode': 'strict' is not one of 'off', "
                               "'enforce'"),
    (["--config", "/nonexistent/boot.yaml"], "Invalid value for '--config': File "),
])
def test_serve_rejects_bad_flags(args: list[str], problem: str) -> None:
    result = CliRunner().invoke(app.main, ["serve", *args])
    assert result.exit_code == 2 and problem in result.output, result.output


def test_serve_rejects_a_bad_variable_in_one_line() -> None:
    """The real command in a fresh interpreter: stderr is the one line, status 2, no traceback."""
    for name, value, problem in [("MLEMU_PORT", "abc", "is not a valid integer"),
                                 ("MLEMU_IAM_MODE", "strict", "is not one of 'off', 'enforce'")]:
        env = {**os.environ, name: value}
        done = subprocess.run([sys.executable, str(ROOT / "app.py"), "serve"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == f"Error: {name}: {value!r} {problem}\n"


def test_local_containers_under_enforced_iam_need_an_allow_list() -> None:
    """Off, or IAM off: no list needed; enforced: refused at start in one line (the real
    command, fresh interpreter), accepted once MLEMU_VERTEX_CONTAINER_COMMANDS names some."""
    on = {"MLEMU_VERTEX_LOCAL_CONTAINERS": "true"}
    assert Settings.from_env(on).vertex_container_commands is None
    assert not Settings.from_env({"MLEMU_IAM_MODE": "enforce"}).vertex_local_containers
    with pytest.raises(SettingsError, match="MLEMU_VERTEX_CONTAINER_COMMANDS"):
        Settings.from_env({**on, "MLEMU_IAM_MODE": "ENFORCE"})
    listed = Settings.from_env({**on, "MLEMU_IAM_MODE": "enforce",
                                "MLEMU_VERTEX_CONTAINER_COMMANDS": "python3, /usr/bin/env"})
    assert listed.vertex_container_commands == ("python3", "/usr/bin/env")
    env = {**os.environ, **on, "MLEMU_IAM_MODE": "enforce"}
    env.pop("MLEMU_VERTEX_CONTAINER_COMMANDS", None)
    done = subprocess.run([sys.executable, str(ROOT / "app.py"), "serve"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "Error: MLEMU_VERTEX_LOCAL_CONTAINERS: with MLEMU_IAM_MODE=enforce, also set "
        "MLEMU_VERTEX_CONTAINER_COMMANDS to the executables containers may run\n")


def test_the_configuration_page_documents_every_variable_and_no_other() -> None:
    """docs/configuration.md's tables (a row's first cell names its variables) match SETTINGS."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    documented = {name for row in page.splitlines() if row.startswith("| `")
                  for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])}
    declared = {name for var in SETTINGS + VERTEX_SETTINGS for name in var.names}
    assert declared <= documented, declared - documented
    assert documented <= declared, documented - declared


def test_every_command_names_a_bad_variable(tmp_path: Path) -> None:
    """The client verbs and local predict read settings too: same one line, same status."""
    runner = CliRunner(env={"MLEMU_PORT": "", "MLEMU_PROJECT": "p", "MLEMU_BATCH_MAX_INSTANCES": "x"})
    for args in (["models", "list"],
                 ["predict", "--model-dir", str(tmp_path), "--json-instances", "-"]):
        result = runner.invoke(app.main, args, input="[1.0]\n")
        assert result.exit_code == 2, result.output
        assert result.output == "Error: MLEMU_BATCH_MAX_INSTANCES: 'x' is not a valid integer\n"
