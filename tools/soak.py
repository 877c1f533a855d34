"""`make soak`: a bounded mixed soak of a real `app.py serve`. Not part of `make test`.

  python tools/soak.py [--seconds 60] [--clients 6]

Starts the server (2 gunicorn workers and the gRPC server) on a fresh state directory with one
scikit-learn model, then for `--seconds` runs at once: :predict, TF Serving, V2 REST and grps
HTTP clients, V2 and grps gRPC clients, a management client that creates, patches and deletes
models and versions (every long-running operation is followed to its end), and a client sending
malformed requests. Half-way it kills one gunicorn worker with SIGKILL. It prints the requests
made, unexpected statuses, 5xx answers, failures that fall in the kill's moment, lost or stuck
operations and the server's resident memory growth, and exits 1 if anything was unexpected.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROW = [5.1, 3.5, 1.4, 0.2]
KILL_GRACE_S = 3.0  # connection errors this close to the worker kill are the kill's, not bugs


class Tally:
    """Thread-safe counts: requests per kind, unexpected answers (with samples), 5xx."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: collections.Counter[str] = collections.Counter()
        self.unexpected: collections.Counter[str] = collections.Counter()
        self.server_errors = 0
        self.at_kill = 0
        self.samples: list[str] = []
        self.killed_at: float | None = None

    def record(self, kind: str, ok: bool, status: int | str, detail: str = "") -> None:
        with self.lock:
            self.requests[kind] += 1
            if ok:
                return
            near_kill = self.killed_at is not None and abs(time.monotonic() - self.killed_at) < KILL_GRACE_S
            if near_kill and not isinstance(status, int):
                self.at_kill += 1
                return
            self.unexpected[kind] += 1
            if isinstance(status, int) and status >= 500:
                self.server_errors += 1
            if len(self.samples) < 10:
                self.samples.append(f"{kind}: {status} {detail[:200]}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_model(directory: Path) -> None:
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    directory.mkdir(parents=True)
    joblib.dump(LogisticRegression(max_iter=500).fit(x, y), directory / "model.joblib")


def start(state: Path, port: int, grpc_port: int) -> subprocess.Popen[bytes]:
    make_model(state / "models" / "iris")
    config = state / "boot.yaml"
    config.write_text("projects:\n  soak:\n    models:\n      iris:\n        versions:\n"
                      f"          v1: {{deploymentUri: {state / 'models' / 'iris'}}}\n")
    env = {**os.environ, "MLEMU_PROJECT": "soak", "MLEMU_WORKERS": "2", "MLEMU_THREADS": "8",
           "MLEMU_LOG_LEVEL": "warning"}
    log = open(state / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "serve", "--port", str(port),
                             "--grpc-port", str(grpc_port), "--state-dir", str(state),
                             "--config", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server did not become ready:\n{(state / 'server.log').read_text()}")


def rss_kib(root_pid: int) -> int:
    """Resident memory of a process and all its descendants (/proc)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children[ppid].append(int(entry.name))
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def http_client(url: str, tally: Tally, stop: threading.Event, kind: str, path: str,
                body: dict[str, Any], ok: Callable[[requests.Response], bool]) -> None:
    with requests.Session() as session:
        while not stop.is_set():
            try:
                answer = session.post(url + path, json=body, timeout=30)
                tally.record(kind, ok(answer), answer.status_code, answer.text)
            except requests.RequestException as exc:
                tally.record(kind, False, type(exc).__name__, str(exc))


def grpc_client(target: str, tally: Tally, stop: threading.Event) -> None:
    import grpc

    from protocols.proto_modules import grpc_predict_v2_pb2 as pb
    from protocols.proto_modules import grpc_predict_v2_pb2_grpc, grps_pb2, grps_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        v2 = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(channel)
        grps = grps_pb2_grpc.GrpsServiceStub(channel)
        infer = pb.ModelInferRequest(model_name="iris")
        infer.inputs.add(name="x", datatype="FP64", shape=[1, 4]).contents.fp64_contents.extend(ROW)
        message = grps_pb2.GrpsMessage(model="iris")
        message.gtensors.tensors.add(name="x", dtype=grps_pb2.DT_FLOAT64, shape=[1, 4],
                                     flat_float64=ROW)
        while not stop.is_set():
            try:
                v2.ModelInfer(infer, timeout=30)
                tally.record("v2 grpc", True, 0)
            except grpc.RpcError as exc:
                tally.record("v2 grpc", False, str(exc.code()), exc.details() or "")
            status = grps.Predict(message, timeout=30).status
            tally.record("grps grpc", status.code == 200, status.code, status.msg)


def management_client(url: str, tally: Tally, stop: threading.Event, state: Path,
                      operations: list[str], index: int) -> None:
    base = f"{url}/v1/projects/soak"
    session = requests.Session()

    def call(method: str, path: str, expect: int, body: Any = None) -> bool:
        try:
            answer = session.request(method, base + path, json=body, timeout=60)
        except requests.RequestException as exc:
            tally.record("management", False, type(exc).__name__, f"{method} {path}: {exc}")
            return False
        tally.record("management", answer.status_code == expect, answer.status_code,
                     f"{method} {path}: {answer.text}")
        data = answer.json() if answer.headers.get("Content-Type") == "application/json" else None
        if isinstance(data, dict) and str(data.get("name", "")).startswith("projects/soak/operations/"):
            operations.append(data["name"])
            wait(data["name"])  # the next step needs it finished
        return answer.status_code == expect

    def wait(operation: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if session.get(f"{url}/v1/{operation}", timeout=30).json().get("done"):
                    return
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.05)

    round_no = 0
    while not stop.is_set():
        round_no += 1
        model = f"m{index}_{round_no}"
        steps = [("POST", "/models", 200, {"name": model, "labels": {"soak": "yes"}}),
                 ("POST", f"/models/{model}/versions", 200,
                  {"name": "v1", "deploymentUri": str(state / "models" / "iris")}),
                 ("PATCH", f"/models/{model}?updateMask=description", 200, {"description": "soaked"}),
                 ("POST", f"/models/{model}:predict", 200, {"instances": [ROW]}),
                 ("GET", "/operations", 200, None),
                 ("DELETE", f"/models/{model}/versions/v1", 200, None),
                 ("DELETE", f"/models/{model}", 200, None)]
        for method, path, expect, body in steps:
            if not call(method, path, expect, body):
                # A step lost to the worker kill: the rest of this round depends on it.
                session.delete(f"{base}/models/{model}/versions/v1", timeout=60)
                session.delete(f"{base}/models/{model}", timeout=60)
                break


def malformed_client(url: str, tally: Tally, stop: threading.Event) -> None:
    bodies = [(b"{bad", "/v1/projects/soak/models/iris:predict"),
              (b'{"instances": "x"}', "/v1/models/iris:predict"),
              (b'{"inputs": [{"name": "x", "datatype": [], "shape": [1]}]}', "/v2/models/iris/infer"),
              (b'{"name": "nl\\n"}', "/v1/projects/soak/models"),
              (b'{"name": "\\ud800"}', "/v1/projects/soak/models")]
    with requests.Session() as session:
        while not stop.is_set():
            for data, path in bodies:
                try:
                    answer = session.post(url + path, data=data, timeout=30,
                                          headers={"Content-Type": "application/json"})
                    ok = (400 <= answer.status_code < 500
                          and answer.headers.get("Content-Type") == "application/json")
                    tally.record("malformed", ok, answer.status_code, answer.text)
                except requests.RequestException as exc:
                    tally.record("malformed", False, type(exc).__name__, str(exc))


def operations_report(url: str, names: list[str]) -> tuple[int, int]:
    """(lost, stuck): operations that are gone, and those still not done 60 s after the soak."""
    lost, pending = 0, set(names)
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            answer = requests.get(f"{url}/v1/{name}", timeout=30)
            if answer.status_code == 404:
                lost += 1
                pending.discard(name)
            elif answer.json().get("done"):
                pending.discard(name)
        time.sleep(0.5)
    return lost, len(pending)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=6, help="HTTP clients per protocol family")
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="mlemu-soak-"))
    port, grpc_port = free_port(), free_port()
    proc = start(state, port, grpc_port)
    url = f"http://127.0.0.1:{port}"
    tally, stop, operations = Tally(), threading.Event(), []  # type: ignore[var-annotated]
    ok200: Callable[[requests.Response], bool] = lambda answer: answer.status_code == 200  # noqa: E731
    v2 = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 4], "data": ROW}]}
    grps = {"gtensors": {"tensors": [{"name": "x", "dtype": "DT_FLOAT64", "shape": [1, 4],
                                      "flat_float64": ROW}]}}
    families = [("aiplatform", "/v1/projects/soak/models/iris:predict", {"instances": [ROW]}),
                ("tfserving", "/v1/models/iris:predict", {"instances": [ROW]}),
                ("v2 rest", "/v2/models/iris/infer", v2),
                ("grps http", "/grps/v1/infer/predict?model=iris", grps)]
    threads = [threading.Thread(target=http_client, args=(url, tally, stop, kind, path, body, ok200))
               for kind, path, body in families for _ in range(max(1, args.clients // 2))]
    threads += [threading.Thread(target=grpc_client, args=(f"127.0.0.1:{grpc_port}", tally, stop))
                for _ in range(2)]
    threads += [threading.Thread(target=management_client, args=(url, tally, stop, state, operations, i))
                for i in range(2)]
    threads.append(threading.Thread(target=malformed_client, args=(url, tally, stop)))
    requests.get(f"{url}/grps/v1/health/online", timeout=10)
    rss_start = rss_kib(proc.pid)
    began = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(args.seconds / 2)
    victim = requests.get(f"{url}/healthz", timeout=10).json()["pid"]
    tally.killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    time.sleep(args.seconds / 2)
    stop.set()
    for thread in threads:
        thread.join(120)
    elapsed = time.monotonic() - began
    rss_end = rss_kib(proc.pid)
    lost, stuck = operations_report(url, operations)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(30)
    total = sum(tally.requests.values())
    print(f"soak: {elapsed:.0f} s, {total} requests ({total / elapsed:.0f}/s); worker {victim} killed "
          f"with SIGKILL at {args.seconds / 2:.0f} s")
    print("  per kind: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.requests.items())))
    print(f"  unexpected: {sum(tally.unexpected.values())} {dict(tally.unexpected)}; 5xx: "
          f"{tally.server_errors}; connection errors at the kill: {tally.at_kill}")
    print(f"  operations: {len(operations)} started, {lost} lost, {stuck} stuck")
    print(f"  server RSS: {rss_start / 1024:.0f} MiB -> {rss_end / 1024:.0f} MiB "
          f"({(rss_end - rss_start) / 1024:+.0f} MiB; the killed worker was replaced)")
    for sample in tally.samples:
        print("  sample: " + sample)
    bad = sum(tally.unexpected.values()) or lost or stuck
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
