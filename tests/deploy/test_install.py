"""mlemu installs as a package (pyproject.toml, setup.py): a wheel built from a clean checkout
holds every runtime package, the generated gRPC modules and the data files; the `mlemu` command
of a fresh virtualenv serves from the installed package's own paths, installed from the wheel or
editable; and what a remote Beam worker imports comes from the wheel alone (the README's
"other runners": the wheel is passed as --extra_package)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT, free_port
from tests.kit import modelkit

RUNTIME_PACKAGES = ("core", "auth", "registry", "predictors", "explainers", "batch",
                    "observability", "emulator", "dataplane", "controlplane", "api", "protocols",
                    "web", "boot", "grpcserve", "cli", "deploy", "controls", "admin")
#: Not part of a checkout's sources: build products, caches, local state.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", ".venvs", "_generated", "tests", "bench",
                                     "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                     ".*_cache", "mlemu-state", "models")


DOC = ROOT / "docs" / "install.md"


def documented(command: str) -> list[str]:
    """`command` as docs/install.md shows it in a `sh` block (so what runs here is what the page
    says), split into arguments."""
    blocks = re.findall(r"^```sh[^\n]*\n(.*?)^```", DOC.read_text(), re.MULTILINE | re.DOTALL)
    assert any(command in block.splitlines() for block in blocks), f"{command!r} not in {DOC}"
    return shlex.split(command)


def clean_checkout(into: Path) -> Path:
    """The checkout's sources without anything built (no protocols/_generated)."""
    copy = into / "checkout"
    shutil.copytree(ROOT, copy, ignore=NOT_SOURCES)
    assert not (copy / "protocols" / "_generated").exists()
    return copy


def pip(python: Path | str, command: list[str], cwd: Path | None = None) -> None:
    """A documented `python -m pip ...` with `python`, without the network: the build uses this
    interpreter's setuptools and grpcio-tools (requirements-dev.txt, requirements.txt) and
    installs no dependencies (`python` sees them already)."""
    assert command[:3] == ["python", "-m", "pip"], command
    offline = ["--no-deps", "--no-build-isolation"] if command[3] in ("install", "wheel") else []
    subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *command[3:],
                    *offline], cwd=cwd, check=True, capture_output=True, timeout=600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    checkout = clean_checkout(tmp_path_factory.mktemp("wheel"))
    pip(sys.executable, documented("python -m pip wheel --no-deps -w dist ."), cwd=checkout)
    (built,) = (checkout / "dist").glob("mlemu-*.whl")
    assert built.name == "mlemu-0.1.0-py3-none-any.whl"  # the name docs/install.md and README use
    return built


def test_the_wheel_holds_every_runtime_module_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {str(path.relative_to(ROOT)) for package in RUNTIME_PACKAGES
               for path in (ROOT / package).rglob("*.py")
               if "_generated" not in path.parts and "__pycache__" not in path.parts}
    assert sources - names == set()
    assert {"app.py", "registry/ml_v1.json", "deploy/gunicorn.conf.py",
            "protocols/_generated/__init__.py", "protocols/_generated/grpc_predict_v2_pb2.py",
            "protocols/_generated/grps_pb2_grpc.py", "protocols/_generated/grps.proto"} <= names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "mlemu = app:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_a_beam_worker_imports_everything_it_needs_from_the_wheel(wheel: Path,
                                                                  tmp_path: Path) -> None:
    """A remote worker has the wheel installed and mlemu's requirements, nothing of the
    checkout: with the wheel's contents alone on the path, the pipeline's modules import and a
    model loads and predicts as a worker's DoFn does."""
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    model = tmp_path / "model"
    modelkit.sklearn_model(model, "logreg", features=4)
    script = f"""
import importlib, sys
for name in ("batch.pipeline", "batch.workerpool", "batch.forkserver", "batch.records",
             "batch.sources", "predictors", "registry.artifacts", "registry.gcs", "core.wirejson",
             "protocols.proto_modules"):
    module = importlib.import_module(name)
    assert module.__file__.startswith({str(unpacked)!r}), (name, module.__file__)
import predictors
predictor, _ = predictors.load({str(model)!r}, "SCIKIT_LEARN", None, [])
print(list(predictor.predict([[1.0, 2.0, 0.5, -1.0]])))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**env, "PYTHONPATH": str(unpacked)})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() in ("[0]", "[1]")


def fresh_venv(path: Path) -> Path:
    """A new virtualenv that sees this interpreter's installed requirements (a .pth file), so
    installing mlemu into it needs no download; mlemu itself is not in it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True).stdout
    (Path(purelib.strip()) / "requirements.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def serve_and_predict(bin_dir: Path, workdir: Path, model: Path) -> str:
    """The documented `mlemu serve` run from `workdir` answers a prediction; the command line of
    the process it became (gunicorn's master)."""
    port = free_port()
    modelkit.bootstrap_file(workdir / "mlemu.yaml",
                            {"m": {"versions": {"v1": {"deploymentUri": str(model)}}}})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argv = documented("mlemu serve --config mlemu.yaml")
    proc = subprocess.Popen([str(bin_dir / argv[0]), *argv[1:]], cwd=workdir,
                            env={**env, "MLEMU_GRPC_PORT": "0", "MLEMU_PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120  # a bound on start-up, not a speed assertion
        while True:
            assert proc.poll() is None, "mlemu serve exited"
            try:
                answer = requests.post(f"http://127.0.0.1:{port}/v1/projects/p/models/m:predict",
                                       json={"instances": [[1.0, 2.0, 0.5, -1.0]]}, timeout=5)
                if answer.status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "mlemu serve did not answer"
            time.sleep(0.2)
        assert len(answer.json()["predictions"]) == 1
        return Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().replace("\0", " ")
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


@pytest.mark.slow
def test_pip_install_gives_a_working_mlemu_command_editable_or_not(tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    bin_dir = tmp_path / "venv" / "bin"
    checkout = clean_checkout(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    model = tmp_path / "model"
    modelkit.sklearn_model(model, "logreg", features=4)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True).stdout.strip()

    pip(python, documented("python -m pip install ."), cwd=checkout)
    helped = subprocess.run([str(bin_dir / "mlemu"), *documented("mlemu --help")[1:]],
                            cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "serve" in helped.stdout
    cmdline = serve_and_predict(bin_dir, elsewhere, model)
    # gunicorn runs the installed package's config, not the checkout's.
    assert f"-c {site}/deploy/gunicorn.conf.py" in cmdline, cmdline
    assert (Path(site) / "protocols" / "_generated" / "grps_pb2.py").exists()

    pip(python, ["python", "-m", "pip", "uninstall", "-y", "mlemu"])
    shutil.rmtree(checkout / "build")  # what the first build left
    pip(python, documented("python -m pip install -e ."), cwd=checkout)
    assert (checkout / "protocols" / "_generated" / "grps_pb2.py").exists()  # built in place
    cmdline = serve_and_predict(bin_dir, elsewhere, model)
    assert f"-c {checkout}/deploy/gunicorn.conf.py" in cmdline, cmdline


def test_make_venv_installs_the_requirements_then_mlemu_editable(tmp_path: Path) -> None:
    """`make venv` (dry run into a new path): the pinned requirements, then mlemu itself editable
    with the build using those pins (the install the test above runs), so .venv/bin/mlemu exists."""
    venv = tmp_path / "venv"
    planned = subprocess.run(["make", "-n", "-s", "--no-print-directory", "-C", str(ROOT), "venv",
                              f"VENV={venv}"], capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    requirements = next(i for i, line in enumerate(lines) if "-r requirements-dev.txt" in line)
    editable = lines.index(f"{venv}/bin/python -m pip install --quiet --no-deps "
                           "--no-build-isolation --config-settings editable_mode=compat -e .")
    assert requirements < editable
