"""The servers under test: how each is started, addressed, fed and read.

Each is run as its users run it (bench/NOTES.md, "Fair peers"), one model per start:
- mlemu: `python app.py serve` at its defaults (workers and threads from the CPUs, adaptive
  batching on); the request limit raised to 64 MiB for the 10,000-instance body (AI Platform's
  own limit is 1.5 MiB); gRPC on only for the gRPC scenario. Variants change one setting each
  (levers, not servers of their own): more threads, batching off, XGBoost's all-core default.
- MLServer: `mlserver start` with the settings its own benchmark uses (debug off, that is no
  access log; parallel_workers = one inference process per CPU), adaptive batching off (its
  default), metrics and gRPC servers on (default).
- KServe: kserve_server.py, which starts as sklearnserver/xgbserver do (one model per server,
  KServe's defaults: gRPC on, latency logging on), with `--workers 2`.
- flask: naive_flask.py under gunicorn with mlemu's default process layout.
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
CPUS = len(os.sched_getaffinity(0))
PEER_MODELS = ("logreg", "forest", "xgb")
ALL_MODELS = ("logreg", "forest", "xgb", "tf", "tf1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def framework(model_dir: Path) -> str:
    if (model_dir / "saved_model.pb").exists():
        return "TENSORFLOW"
    return "XGBOOST" if (model_dir / "model.bst").exists() else "SCIKIT_LEARN"


class Server:
    name = ""
    models: tuple[str, ...] = PEER_MODELS
    #: False: only the load runs (a variant measuring one lever, not a server of its own).
    full = True
    #: Models whose load scenarios run on this server (default: all it serves).
    measured: tuple[str, ...] = ()
    #: Serves V2 ModelInfer over gRPC (inference.GRPCInferenceService).
    grpc = False

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.grpc_port = 0
        self.with_grpc = False  # whether this start opens gRPC where it is off by default

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def start(self, model_dirs: dict[str, Path], log: Path,
              grpc: bool = False) -> subprocess.Popen[bytes]:
        """Start serving `model_dirs` (name -> directory); `grpc` also opens a gRPC port where
        the server has one and does not open it by default."""
        self.port = free_port()
        self.grpc_port = free_port() if self.grpc else 0
        self.with_grpc = grpc
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
    models = ALL_MODELS
    grpc = True

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        config = {"projects": {"bench": {"models": {
            name: {"versions": {"v1": {"deploymentUri": str(d), "framework": framework(d)}}}
            for name, d in model_dirs.items()}}}}
        path = self.workdir / "mlemu.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {"MLEMU_GRPC_PORT": str(self.grpc_port if self.with_grpc else 0),
               "MLEMU_MAX_REQUEST_BYTES": str(64 << 20), "MLEMU_PROJECT": "bench"}
        state = self.workdir / "state"
        return ([sys.executable, str(ROOT / "app.py"), "serve", "--config", str(path), "--port",
                 str(self.port), "--state-dir", str(state)], env)

    def url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/v1/projects/bench/models/{model}:predict"

    def settings(self) -> str:
        workers, threads = _mlemu_layout()
        return ("`python app.py serve` at its defaults: gunicorn, workers and threads from the CPUs "
                f"and memory ({workers} x {threads} here), adaptive batching on (64 instances), "
                "XGBoost 1 OpenMP thread per call; MLEMU_MAX_REQUEST_BYTES=64 MiB; gRPC only in "
                "the gRPC scenario")


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


class MlemuThreads8(MlemuLever):
    """The layout before issue 21 (2 x 8 on 2 CPUs): the before of the default's 32 threads."""

    name = "mlemu-threads8"
    measured = PEER_MODELS
    lever_env = (("MLEMU_THREADS", "8"),)
    lever = "8 threads per worker, the default before issue 21 (now 32 on 2 CPUs)"


class MlemuThreads4(MlemuLever):
    """Not in the default run: for the c=8 tail hypotheses (bench/NOTES.md), fewer threads
    contending for each worker's GIL."""

    name = "mlemu-threads4"
    measured = PEER_MODELS
    lever_env = (("MLEMU_THREADS", "4"),)
    lever = "4 threads per worker instead of the default 8"


class MlemuUnbatched(MlemuLever):
    name = "mlemu-unbatched"
    measured = ("logreg", "forest")
    lever_env = (("MLEMU_BATCH_MAX_INSTANCES", "0"),)
    lever = "adaptive batching off"


class MlemuNoMetrics(MlemuLever):
    """Issue 18: recording metrics must cost no measurable throughput; this is the before."""

    name = "mlemu-nometrics"
    measured = ("logreg",)
    lever_env = (("MLEMU_METRICS", "false"),)
    lever = "Prometheus metrics off (recording and /metrics)"


class MlemuXgbAllThreads(MlemuLever):
    name = "mlemu-xgb-allthreads"
    measured = ("xgb",)
    lever_env = (("MLEMU_XGBOOST_NTHREAD", "0"),)
    lever = "XGBoost's default: all cores per call"


class MLServer(Server):
    name = "mlserver"
    grpc = True

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        repo = self.workdir / "repo"
        repo.mkdir(parents=True, exist_ok=True)
        # MLServer's own benchmark settings (SeldonIO/MLServer benchmarking/testserver/
        # settings.json): debug off (debug, the default, logs every request), one inference
        # worker per core.
        (repo / "settings.json").write_text(json.dumps({
            "debug": False, "parallel_workers": CPUS, "http_port": self.port,
            "grpc_port": self.grpc_port, "metrics_port": free_port(), "host": "127.0.0.1"}))
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
        return (f"`mlserver start`, settings.json as MLServer's own benchmark: debug false (default "
                f"true: a log line per request), parallel_workers={CPUS} (one per CPU; default 1); "
                "adaptive batching off (default), gRPC and metrics servers on (default); V2 REST")


class KServe(Server):
    name = "kserve"
    grpc = True

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        if len(model_dirs) != 1:  # sklearnserver and xgbserver serve one model each
            raise ValueError("KServe's servers take one model each")
        ((name, d),) = model_dirs.items()
        argv = [str(VENVS / "kserve" / "bin" / "python"), str(ROOT / "bench" / "kserve_server.py"),
                "--model_name", name, "--model_dir", str(d), "--http_port", str(self.port),
                "--grpc_port", str(self.grpc_port), "--workers", "2"]
        return argv, {}

    def url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/v1/models/{model}:predict"

    def settings(self) -> str:
        return ("bench/kserve_server.py: what KServe's sklearnserver / xgbserver 0.21 do (one model "
                "per server, xgbserver's nthread=1), `--workers 2`, KServe's defaults otherwise "
                "(gRPC on, latency logging on); KServe V1 REST")


def _mlemu_layout() -> tuple[int, int]:
    """(workers, threads) mlemu's defaults choose on this machine."""
    from core.settings import Settings

    return Settings.from_env({}).worker_layout()


class NaiveFlask(Server):
    name = "flask"
    models = ALL_MODELS

    def command(self, model_dirs: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
        if len(model_dirs) != 1:
            raise ValueError("the naive Flask app serves one model")
        ((_, d),) = model_dirs.items()
        argv = [sys.executable, "-m", "gunicorn", "--workers", "2", "--threads", "8", "--chdir",
                str(ROOT / "bench"), "--bind", f"127.0.0.1:{self.port}", "naive_flask:app"]
        return argv, {"BENCH_MODEL_DIR": str(d)}

    def url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/predict"

    def settings(self) -> str:
        return ("bench/naive_flask.py (Flask, model loaded at import, numpy in, `.tolist()` out) "
                "under gunicorn --workers 2 --threads 8: its best layout here (with mlemu's "
                "2 x 32 it served less and less steadily, bench/NOTES.md)")


SERVERS: dict[str, type[Server]] = {"mlemu": Mlemu, "mlemu-threads8": MlemuThreads8,
                                    "mlemu-threads4": MlemuThreads4,
                                    "mlemu-unbatched": MlemuUnbatched,
                                    "mlemu-xgb-allthreads": MlemuXgbAllThreads,
                                    "mlemu-nometrics": MlemuNoMetrics,
                                    "mlserver": MLServer, "kserve": KServe, "flask": NaiveFlask}
PEERS = ("mlserver", "kserve", "flask")
#: The peers that are model servers. Cold start and idle memory are compared with these only:
#: issue 21 asks those two figures to *stay* at <= 0.5x, i.e. against the servers the first round
#: compared (KServe, MLServer); a bare Flask app that serves one pickle is no alternative a user
#: would deploy, and is a peer for throughput and latency only.
MODEL_SERVERS = ("mlserver", "kserve")
