"""Models and a live server (HTTP + gRPC) for the V2 and grps protocol tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.conftest import LiveServer, free_port, start_server, stop_server
from tests.kit import modelkit

PROJECT = "mlemu"  # the default project the protocols serve

#: A custom predictor exercising the grps payload kinds and streaming.
ECHO_SOURCE = '''
def double(value):
    if isinstance(value, list):
        return [double(v) for v in value]
    return value if isinstance(value, (str, bytes)) else value * 2


class EchoPredictor:
    """Strings: upper-cased (\"stream: a b\" yields words one by one); bytes: reversed;
    objects: their keys sorted with values doubled; rows of numbers: their sums."""

    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, scale=1, **kwargs):
        first = instances[0]
        if isinstance(first, str) and first.startswith("stream:"):
            return (word for word in first[len("stream:"):].split())
        if isinstance(first, str):
            return [first.upper()]
        if isinstance(first, bytes):
            return [first[::-1]]
        if isinstance(first, dict):
            return [{k: double(v) for k, v in sorted(first.items())}]
        return [scale * sum(row) for row in instances]
'''


def text_pipeline(directory: Path) -> Any:
    """A scikit-learn text classifier with string labels: BYTES in, BYTES out."""
    import joblib
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts = ["good great fine", "great good", "bad awful", "awful terrible bad", "fine good",
             "terrible"]
    labels = ["pos", "pos", "neg", "neg", "pos", "neg"]
    model = make_pipeline(CountVectorizer(), LogisticRegression()).fit(texts, labels)
    directory.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, directory / "model.joblib")
    return model


def build_models(root: Path, tensorflow: bool = False) -> dict[str, Any]:
    """The protocol tests' models, as {model name: bootstrap entry} (TensorFlow ones on request:
    building them and serving them costs TensorFlow's import in every process)."""
    modelkit.sklearn_model(root / "sk_v1", "logreg", features=4)
    modelkit.sklearn_model(root / "sk_v2", "forest", features=4)
    text_pipeline(root / "text")
    modelkit.xgboost_model(root / "xgb", features=3)
    package = modelkit.custom_package(root / "pkg", "echo_predictor", ECHO_SOURCE, kind="dir")
    modelkit.custom_model_dir(root / "echo")
    (root / "empty").mkdir()
    entries: dict[str, Any] = {}
    if tensorflow:
        from tests.kit import tfmodels

        tfmodels.tf2_model(root / "tf2")
        tfmodels.keras_model(root / "keras")
        entries = {name: {"versions": {"v1": {"deploymentUri": str(root / name),
                                              "framework": "TENSORFLOW"}}}
                   for name in ("tf2", "keras")}
    return entries | {
        "broken": {"versions": {"v1": {"deploymentUri": str(root / "empty")}}},  # FAILED: no model
        "sk": {"defaultVersion": "v1", "versions": {
            "v1": {"deploymentUri": str(root / "sk_v1"), "framework": "SCIKIT_LEARN"},
            "v2": {"deploymentUri": str(root / "sk_v2"), "framework": "SCIKIT_LEARN"}}},
        "text": {"versions": {"v1": {"deploymentUri": str(root / "text")}}},
        "xgb": {"versions": {"v1": {"deploymentUri": str(root / "xgb"), "framework": "XGBOOST"}}},
        "echo": {"versions": {"v1": {"deploymentUri": str(root / "echo"),
                                     "predictionClass": "echo_predictor.EchoPredictor",
                                     "packageUris": [str(package)]}}},
    }


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("protocol-models")
    return root, build_models(root)


def start_protocol_server(models: tuple[Path, dict[str, Any]],
                          env: dict[str, str] | None = None, workers: int = 1) -> LiveServer:
    """`app.py serve` with HTTP and gRPC, returned once both have loaded every model."""
    root, entries = models
    config = modelkit.bootstrap_file(root / "bootstrap.yaml", entries, project=PROJECT)
    live = start_server(root / "state", config, workers, grpc_port=free_port(),
                        env={"MLEMU_PROJECT": PROJECT, **(env or {})})
    assert live.grpc_target
    # Each process serving gRPC warms up on its own: wait until every one has answered V2 ServerReady
    # with ready=true (b"\x08\x01"), over fresh connections (the kernel picks the process).
    serving = int((env or {}).get("MLEMU_GRPC_WORKERS") or workers)
    deadline = time.monotonic() + 120  # a bound on a hung start, not a speed requirement
    while len(pending := grpc_processes(live)) < serving:  # each binds the port as it starts
        if time.monotonic() > deadline:
            stop_server(live.proc)
            raise RuntimeError(f"{len(pending)} of {serving} gRPC servers listen:\n{live.output()}")
        time.sleep(0.1)
    while pending:
        with fresh_channel(live.grpc_target) as channel:
            ready = channel.unary_unary("/inference.GRPCInferenceService/ServerReady",
                                        request_serializer=bytes, response_deserializer=bytes)
            if ready(b"", timeout=5) == b"\x08\x01":
                pending.discard(serving_pid(live, channel))
        if time.monotonic() > deadline:
            stop_server(live.proc)
            raise RuntimeError(f"gRPC server not ready:\n{live.output()}")
    return live


def grpc_processes(live: LiveServer) -> set[int]:
    """The pids of a live `app.py serve`'s processes serving gRPC (gunicorn's workers by
    default, grpcserve/server.py processes with MLEMU_GRPC_WORKERS): the processes of its tree
    holding a socket that listens on the gRPC port, from /proc."""
    assert live.grpc_target
    port = int(live.grpc_target.rsplit(":", 1)[1])
    listening = sockets_on(port, state="0A")  # TCP_LISTEN
    return {pid for pid in descendants(live.proc.pid)
            if any(link_target(fd) in listening for fd in _fds(pid))}


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children, their children, ...), from /proc."""
    found: set[int] = set()
    pending = [pid]
    while pending:
        for task in _iterdir(Path(f"/proc/{pending.pop()}/task")):
            for child in _read(task / "children").split():
                if int(child) not in found:
                    found.add(int(child))
                    pending.append(int(child))
    return found


def sockets_on(port: int, state: str) -> set[str]:
    """fd link targets ("socket:[inode]") of the TCP sockets whose local port is `port`, in
    `state` (/proc/net/tcp's hex state: 01 established, 0A listening)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            # local address HEX_IP:HEX_PORT, state, inode in column 9
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == state:
                inodes.add(f"socket:[{fields[9]}]")
    return inodes


def _iterdir(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:  # the process is gone
        return []


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _fds(pid: int) -> list[Path]:
    return _iterdir(Path(f"/proc/{pid}/fd"))


def fresh_channel(target: str) -> grpc.Channel:
    """A channel with a connection of its own (grpcio shares subchannels between channels to the
    same target by default)."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


def serving_pid(live: LiveServer, channel: grpc.Channel) -> int:
    """Which gRPC process holds `channel`'s connection (the channel must have made a call and
    be the only client connection open): the process whose file descriptors include the
    server side of the one established TCP connection on the gRPC port, from /proc."""
    assert live.grpc_target
    inodes = sockets_on(int(live.grpc_target.rsplit(":", 1)[1]), state="01")
    holders = {pid for pid in grpc_processes(live) for fd in _fds(pid) if link_target(fd) in inodes}
    assert len(holders) == 1, (holders, inodes)
    return holders.pop()


def link_target(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:  # closed meanwhile
        return ""


@pytest.fixture(scope="module")
def server(models: tuple[Path, dict[str, Any]]) -> Iterator[LiveServer]:
    """One live `app.py serve` (gunicorn + gRPC) per test module."""
    live = start_protocol_server(models)
    yield live
    stop_server(live.proc)


def in_process(model_dir: Path, instances: list[Any], framework: str | None = None) -> list[Any]:
    """Predictions of the same model loaded in the test process (the reference answer)."""
    import predictors

    predictor, _ = predictors.load(str(model_dir), framework)
    return list(predictor.predict(instances))
