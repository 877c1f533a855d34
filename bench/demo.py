"""The demo's memory: what `make serve` starts (the Makefile's serve target: `mlemu serve` on
demo/bootstrap.yaml with MLEMU_PROJECT=demo and MLEMU_EXPLAIN_ANY_FRAMEWORK=true, every other
setting at its default, gRPC included), measured as the PSS summed over its whole process tree
(the supervisor, gunicorn's master and workers, and whatever serves gRPC) from
/proc/PID/smaps_rollup.

Two readings: idle, once the server is ready (/readyz, the gRPC port accepting connections) and
its memory has settled; and after one request to each demo version, every answer checked. Only
the ports and the state directory differ from `make serve` (free ports, a directory of the
bench's own), so the figure is the demo's as a user starts it, whatever process layout the
server chooses.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import measure, models
from bench.servers import ROOT, free_port

#: The settings the Makefile's serve target sets (everything else stays at its default).
SERVE_ENV = {"MLEMU_PROJECT": "demo", "MLEMU_EXPLAIN_ANY_FRAMEWORK": "true"}
DEMO_MODELS = ROOT / "mlemu-state" / "demo-models"  # where demo/make_models.py trains them
#: Settled: the last readings (1 s apart) within this many MiB of each other.
SETTLE_MIB = 2.0
SETTLE_READINGS = 3
SETTLE_LIMIT_S = 120.0


def settled(readings: Sequence[float], n: int = SETTLE_READINGS, tolerance: float = SETTLE_MIB) -> bool:
    """Whether memory has stopped moving: the last `n` readings span at most `tolerance`."""
    last = readings[-n:]
    return len(last) == n and max(last) - min(last) <= tolerance


def requests() -> list[tuple[str, dict[str, Any], Callable[[list[Any]], bool]]]:
    """(ml v1 path, body, check of the predictions) for each demo version, the bodies those of
    demo/curl_examples.sh; the checks compare with the model files' own predictions where the
    bench can compute them in-process, and TF Serving's y = 0.5 x + 3 for half_plus_three."""
    iris = [[5.1, 3.5, 1.4, 0.2]]
    census = [[1.5, None, -0.3]]  # null is a missing value (the model was trained with them)

    def same_as(name: str, ref: str, rows: list[list[Any]]) -> Callable[[list[Any]], bool]:
        def check(got: list[Any]) -> bool:
            array = [[math.nan if v is None else v for v in row] for row in rows]
            return measure.same(got, models.reference(DEMO_MODELS / name, ref)(array))
        return check

    base = "/v1/projects/demo/models"
    return [
        (f"{base}/iris/versions/v1:predict", {"instances": iris}, same_as("iris_v1", "logreg", iris)),
        (f"{base}/iris/versions/v2:predict", {"instances": iris}, same_as("iris_v2", "logreg", iris)),
        (f"{base}/census_xgb/versions/v1:predict", {"instances": census},
         same_as("census_xgb", "xgb", census)),
        (f"{base}/threshold/versions/v1:predict", {"instances": iris, "threshold": 0.7},
         lambda got: len(got) == 1),
        (f"{base}/half_plus_three/versions/v1:predict", {"instances": [1.0, 2.0, 5.0]},
         lambda got: measure.same(got, [3.5, 4.0, 5.5])),
    ]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _settle(pid: int, bench_log: Callable[[str], None]) -> dict[str, float]:
    """The tree's memory once it has settled (or after SETTLE_LIMIT_S, said in the log)."""
    readings: list[float] = []
    deadline = time.monotonic() + SETTLE_LIMIT_S
    while True:
        time.sleep(1)
        memory = measure.memory(pid)
        readings.append(memory["pss_mib"])
        if settled(readings):
            return memory
        if time.monotonic() > deadline:
            bench_log(f"demo: PSS still moving after {SETTLE_LIMIT_S:.0f} s: {readings[-5:]}")
            return memory


def per_process(pid: int) -> list[dict[str, Any]]:
    """Each process of the tree: its command line (shortened) and PSS, to tell what holds the
    memory (gunicorn's master and workers, gRPC servers, the supervisor)."""
    out = []
    for p in measure.tree(pid):
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        pss = next(int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:"))
        command = " ".join(a.decode(errors="replace") for a in argv if a)
        out.append({"pid": p, "command": command[:120], "pss_mib": pss / 1024})
    return out


def demo_memory(out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Start the demo as `make serve` does; its process tree's memory idle and after one
    request to each demo version."""
    subprocess.run([sys.executable, str(ROOT / "demo" / "make_models.py")], check=True,
                   cwd=ROOT, timeout=1800)  # `make serve` depends on `make demo`
    work = out / "run" / "demo"
    work.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_port(), free_port()
    argv = [sys.executable, str(ROOT / "app.py"), "serve", "--config", "demo/bootstrap.yaml",
            "--port", str(port), "--state-dir", str(work / "state")]
    env = {**os.environ, **SERVE_ENV, "MLEMU_GRPC_PORT": str(grpc_port)}
    with (work / "server.log").open("wb") as server_log:
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=server_log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ready_s = measure.wait_ready(
            lambda: measure.get_status(f"http://127.0.0.1:{port}/readyz") == 200
            and _accepts(grpc_port), proc, 600)
        idle = {**_settle(proc.pid, log), "per_process": per_process(proc.pid)}
        for path, body, check in requests():
            status, answer = measure.post(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode())
            if status != 200 or not check(list(answer.get("predictions", []))
                                          if isinstance(answer, dict) else []):
                raise measure.CheckFailed(f"demo {path}: {status} {answer!r:.300}")
        used = _settle(proc.pid, log)
    except Exception:
        print((work / "server.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        measure.stop(proc)
    log(f"demo: ready in {ready_s:.1f} s; idle PSS {idle['pss_mib']:.0f} MiB in "
        f"{idle['processes']} processes, {used['pss_mib']:.0f} MiB after one request per version")
    return {"ready_s": ready_s, "idle": idle, "after_requests": used}
