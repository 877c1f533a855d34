"""The servers under test: how each is started, addressed, fed and read.

Each gets both cores with the settings its users would use (README of each project):
- mlemu: `python app.py serve` defaults (gunicorn, 2 gthread workers x 8 threads, adaptive
  batching on), gRPC off (MLEMU_GRPC_PORT=0), request limit raised to 64 MiB for the
  10,000-instance body (AI Platform's own limit is 1.5 MiB).
- MLServer: `mlserver start` with parallel_workers=2 (one inference process per core; the default
  is 1), adaptive batching off (its default), metrics and gRPC on their default (enabled).
- KServe: the minimal `kserve.Model` subclass in kserve_server.py, `--workers 2` (one uvicorn
  process per core), gRPC off, everything else default (latency logging on).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
VENVS = ROOT / "bench" / ".venvs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    name = ""
    #: The JSON field wrk's script checks in every answer.
    field = "predictions"
    models: tuple[str, ...] = ("logreg", "forest", "xgb")
    #: False: only the load runs (a variant measuring one lever, not a server of its own).
    full = True
    #: Models whose load scenarios run on this server (default: all it serves).
    measured: tuple[str, ...] = ()

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def start(self, model_dirs: dict[str, Path], log: Path) -> subprocess.Popen[bytes]:
        self.port = free_port()
        argv, env = self.command(model_dirs)
        out = log.open("wb")
        return subprocess.Popen(argv, env={**os.environ, **env}, cwd=self.workdir, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def url(self, model: str) -> str:
        raise NotImplementedError

    def body(self, rows: Sequence[Any]) -> bytes:
        return json.dumps({"instances": rows}).encode()

    def predictions(self, answer: Any) -> list[Any]:
        return list(answer["predictions"])

    def settings(self) -> str:
        raise NotImplementedError


class Mlemu(Server):
    name = "mlemu"
    models = ("logreg", "forest", "xgb", "tf")

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        frameworks = {"logreg": "SCIKIT_LEARN", "forest": "SCIKIT_LEARN", "xgb": "XGBOOST",
                      "tf": "TENSORFLOW"}
        config = {"projects": {"bench": {"models": {
            name: {"versions": {"v1": {"deploymentUri": str(d), "framework": frameworks[name]}}}
            for name, d in model_dirs.items()}}}}
        path = self.workdir / "mlemu.yaml"
        path.write_text(yaml.safe_dump(config))
        # 32 threads per worker: batching can only merge requests that are in flight at once
        # (README, "Performance").
        env = {"MLEMU_GRPC_PORT": "0", "MLEMU_MAX_REQUEST_BYTES": str(64 << 20),
               "MLEMU_PROJECT": "bench", "MLEMU_THREADS": "32"}
        state = self.workdir / "state"
        return ([sys.executable, str(ROOT / "app.py"), "serve", "--config", str(path), "--port",
                 str(self.port), "--state-dir", str(state)], env)

    def url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/v1/projects/bench/models/{model}:predict"

    def settings(self) -> str:
        return ("`python app.py serve`: gunicorn, 2 gthread workers x 32 threads (MLEMU_THREADS=32, "
                "as README \"Performance\" advises for many concurrent small requests), adaptive "
                "batching on (default, 64 instances), XGBoost 1 OpenMP thread per call (default); "
                "gRPC off; MLEMU_MAX_REQUEST_BYTES=64 MiB")


class MlemuLever(Mlemu):
    """mlemu with one lever changed by environment: the before of that lever."""

    full = False  # serves what mlemu serves: same process, one setting changed
    #: The environment that changes the lever, and what that means.
    lever_env: tuple[tuple[str, str], ...] = ()
    lever: str = ""

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        argv, env = super().command(model_dirs)
        return argv, {**env, **dict(self.lever_env)}

    def settings(self) -> str:
        changed = ", ".join(f"{k}={v}" for k, v in self.lever_env)
        return f"as mlemu, with {changed} ({self.lever})"


class MlemuUnbatched(MlemuLever):
    name = "mlemu-unbatched"
    measured = ("logreg", "forest")
    lever_env = (("MLEMU_BATCH_MAX_INSTANCES", "0"),)
    lever = "adaptive batching off"


class MlemuXgbAllThreads(MlemuLever):
    name = "mlemu-xgb-allthreads"
    measured = ("xgb",)
    lever_env = (("MLEMU_XGBOOST_NTHREAD", "0"),)
    lever = "XGBoost's default: all cores per call"


class MLServer(Server):
    name = "mlserver"
    field = "data"

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        repo = self.workdir / "repo"
        repo.mkdir(parents=True, exist_ok=True)
        (repo / "settings.json").write_text(json.dumps({
            "parallel_workers": 2, "http_port": self.port, "grpc_port": free_port(),
            "metrics_port": free_port(), "host": "127.0.0.1"}))
        for name, d in model_dirs.items():
            (repo / name).mkdir(exist_ok=True)
            xgb = name == "xgb"
            (repo / name / "model-settings.json").write_text(json.dumps({
                "name": name,
                "implementation": "mlserver_xgboost.XGBoostModel" if xgb
                else "mlserver_sklearn.SKLearnModel",
                "parameters": {"uri": str(d / ("model.bst" if xgb else "model.joblib"))}}))
        return [str(VENVS / "mlserver" / "bin" / "mlserver"), "start", str(repo)], {}

    def url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/v2/models/{model}/infer"

    def body(self, rows: Sequence[Any]) -> bytes:
        width = len(rows[0]) if rows else 0
        return json.dumps({"inputs": [{"name": "input-0", "shape": [len(rows), width],
                                       "datatype": "FP64", "data": rows}]}).encode()

    def predictions(self, answer: Any) -> list[Any]:
        return list(answer["outputs"][0]["data"])

    def settings(self) -> str:
        return ("`mlserver start` with settings.json parallel_workers=2 (default 1), adaptive "
                "batching off (default), gRPC and metrics servers on (default); V2 REST")


class KServe(Server):
    name = "kserve"

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        argv = [str(VENVS / "kserve" / "bin" / "python"), str(ROOT / "bench" / "kserve_server.py"),
                "--http_port", str(self.port), "--grpc_port", str(free_port()), "--workers", "2"]
        for d in model_dirs.values():
            argv += ["--model_dir", str(d)]
        return argv, {}

    def url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/v1/models/{model}:predict"

    def settings(self) -> str:
        return ("bench/kserve_server.py (a minimal kserve.Model subclass, sync predict) with "
                "`--workers 2`; gRPC off; defaults otherwise (latency logging on); KServe V1 REST")


SERVERS: dict[str, type[Server]] = {"mlemu": Mlemu, "mlemu-unbatched": MlemuUnbatched,
                                    "mlemu-xgb-allthreads": MlemuXgbAllThreads,
                                    "mlserver": MLServer, "kserve": KServe}
