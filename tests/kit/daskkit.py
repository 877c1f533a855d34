"""A `dask.distributed` cluster as separate processes on 127.0.0.1 (a scheduler and workers, each
worker with a directory of its own standing for its machine), and mlemu itself as its real wheel
installed into each worker's directory, for tests of batch jobs on Beam's DaskRunner.

The wheel is the repository's own (`pip wheel --no-deps --no-build-isolation .`: pyproject.toml's
package list, setup.py's generated gRPC modules), built offline, within BUILD_S, from a copy of
what the build reads (BUILD_FILES and the listed packages) in a temporary directory, so the
checkout gets no build/ or *.egg-info. Each worker installs it with `pip install --target` into
its own directory and runs with only that directory (not the repository) on its path, as a
machine given the wheel would: Beam's DaskRunner stages no package (apache_beam/runners/dask/
dask_runner.py only connects a `dask.distributed` Client; `--extra_package` is for the runners
that stage, docs/batch.md), so on Dask the wheel is installed on every machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
#: What the build reads besides the packages: its configuration, setup.py's step (protos/ ->
#: protocols/_generated), the requirements pyproject.toml's dynamic dependencies name, the
#: top-level module app.py.
BUILD_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "requirements.txt",
               "requirements-tf.txt", "requirements-beam.txt", "app.py", "protos")
#: Longest the wheel's build (or one install of it) may take: a few seconds, minutes when loaded.
BUILD_S = 300


def wheel_packages() -> list[str]:
    """The top-level packages pyproject.toml ships (its setuptools include list)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({name.split(".")[0] for name in include})


def build_wheel(work: Path) -> Path:
    """mlemu's wheel, built from a copy of the repository's sources in `work`/project, in
    `work`/dist; its path."""
    project = work / "project"
    ignore = shutil.ignore_patterns("__pycache__", "_generated", "*.pyc")
    for name in (*BUILD_FILES, *wheel_packages()):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=ignore)
        else:
            project.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, project / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "-w", str(work / "dist"), str(project)],
                   check=True, capture_output=True, timeout=BUILD_S)
    [wheel] = (work / "dist").glob("mlemu-*.whl")
    return wheel


def _install(wheel: Path, home: Path) -> str:
    """`wheel` installed into `home`/site (a machine's own copy); that directory."""
    site = home / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    "--target", str(site), str(wheel)], check=True, capture_output=True,
                   timeout=BUILD_S)
    return str(site)


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 90) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{what} exited with {proc.returncode}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on 127.0.0.1:{port}")


class DaskCluster:
    """`dask scheduler` and `workers` x `dask worker` (one single-threaded process each)."""

    def __init__(self, work: Path, wheel: Path, workers: int = 2) -> None:
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = []
        # Only the venv's packages and each worker's own install of the wheel: nothing of the
        # repository (its PYTHONPATH, pytest's path, the server's working directory).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["OPENBLAS_NUM_THREADS"] = "1"
        # The scheduler unpickles the task graph (Dask wants one environment everywhere), so
        # it gets the wheel too. Should this process die without stop(), the scheduler ends
        # after 10 idle minutes and the workers a minute after it (--death-timeout).
        self._start(work / "scheduler", {**env, "PYTHONPATH": _install(wheel, work / "scheduler")},
                    "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                    str(self.port), "--no-dashboard", "--idle-timeout", "600s")
        _wait_port(self.port, self.procs[0], "dask scheduler")
        self.sites = []
        for i in range(workers):
            home = work / f"worker{i}"
            self.sites.append(Path(_install(wheel, home)))
            self._start(home, {**env, "PYTHONPATH": str(self.sites[-1])},
                        "distributed.cli.dask_worker",
                        self.address, "--host", "127.0.0.1", "--nworkers", "1", "--nthreads",
                        "1", "--no-dashboard", "--no-nanny", "--local-directory",
                        str(home / "dask"), "--death-timeout", "60", "--name", f"worker{i}")

    def _start(self, home: Path, env: dict[str, str], module: str, *args: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        log = open(home / "log", "wb")  # noqa: SIM115 - lives with the process
        self.logs.append(log)
        self.procs.append(subprocess.Popen([sys.executable, "-m", module, *args], cwd=str(home),
                                           env=env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def client(self, workers: int, timeout: float = 90) -> object:
        """A client once `workers` workers have joined."""
        from distributed import Client

        client = Client(self.address, timeout=timeout)
        client.wait_for_workers(workers, timeout=timeout)
        return client

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        for log in self.logs:
            log.close()
