"""V2 `ModelInfer` over gRPC, one row, concurrency 8: mlemu against MLServer's and KServe's gRPC
V2 servers, one server under load at a time.

Load generator: h2load (nghttp2-client from Debian), which speaks HTTP/2 in C on one event-loop
thread, so it takes a fraction of a core at these rates where a Python gRPC client would be the
bottleneck. gRPC over HTTP/2 is a POST to /inference.GRPCInferenceService/ModelInfer with
`content-type: application/grpc`, `te: trailers` and a body of length-prefixed messages (a zero
compression byte, the length as 4 big-endian bytes, the protobuf: grpc/grpc
doc/PROTOCOL-HTTP2.md), so one prepared frame replays the same request every time. h2load sees
HTTP statuses only (a gRPC error is a 200 with a grpc-status trailer), so the answers are checked
with grpcio outside the timed run (64 distinct rows, in full) and sampled during it.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from bench import measure
from bench.harness import Bench

MODEL = "logreg"
CONCURRENCY = 8
PATH = "/inference.GRPCInferenceService/ModelInfer"
#: V2 datatype -> numpy dtype of raw_output_contents (little-endian, as the protocol says).
RAW = {"INT64": "<i8", "INT32": "<i4", "FP64": "<f8", "FP32": "<f4", "BOOL": "?"}
CONTENTS = {"INT64": "int64_contents", "INT32": "int_contents", "FP64": "fp64_contents",
            "FP32": "fp32_contents", "BOOL": "bool_contents"}


def _pb() -> Any:
    from protocols.proto_modules import grpc_predict_v2_pb2

    return grpc_predict_v2_pb2


def request(model: str, rows: list[list[float]]) -> Any:
    pb = _pb()
    tensor = pb.ModelInferRequest.InferInputTensor(
        name="input-0", datatype="FP64", shape=[len(rows), len(rows[0])],
        contents=pb.InferTensorContents(fp64_contents=[x for row in rows for x in row]))
    return pb.ModelInferRequest(model_name=model, inputs=[tensor])


def frame(message: Any) -> bytes:
    data = message.SerializeToString()
    return b"\0" + len(data).to_bytes(4, "big") + data


def predictions(response: Any) -> list[Any]:
    """Output 0's values, from its typed contents or raw_output_contents (KServe uses the
    latter)."""
    out = response.outputs[0]
    if response.raw_output_contents:
        return np.frombuffer(response.raw_output_contents[0], RAW[out.datatype]).tolist()
    return list(getattr(out.contents, CONTENTS[out.datatype]))


class Client:
    def __init__(self, port: int, model: str) -> None:
        import grpc

        from protocols.proto_modules import grpc_predict_v2_pb2_grpc

        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = grpc_predict_v2_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        self.model = model

    def answer(self, rows: list[list[float]]) -> list[Any]:
        return predictions(self.stub.ModelInfer(request(self.model, rows), timeout=30))

    def check_all(self, rows: list[list[float]], want: list[Any], label: str) -> None:
        for i, row in enumerate(rows):
            got = self.answer([row])
            if not measure.same(got, [want[i]]):
                raise measure.CheckFailed(f"{label}: row {i} answered {got!r}, want {want[i]!r}")

    def close(self) -> None:
        self.channel.close()


def h2load(port: int, body: Path, seconds: float, warmup: float, log: Path) -> dict[str, Any]:
    started = time.time()
    out = subprocess.run(
        ["h2load", "-c", str(CONCURRENCY), "-m", "1", "-t", "1", "-D", f"{seconds:g}",
         f"--warm-up-time={warmup:g}", "-d", str(body), "-H", "content-type: application/grpc",
         "-H", "te: trailers", f"--log-file={log}", f"http://127.0.0.1:{port}{PATH}"],
        capture_output=True, text=True, check=True, timeout=seconds + warmup + 60)
    summary = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, "
                        r"(\d+) failed, (\d+) errored, (\d+) timeout", out.stdout)
    rate = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out.stdout)
    if summary is None or rate is None:
        raise RuntimeError(f"h2load printed no result:\n{out.stdout}\n{out.stderr}")
    # The log has every request, warm-up included: keep those started after the warm-up.
    cutoff = (started + warmup) * 1e6
    durations = sorted(int(cols[2]) for cols in
                       (line.split("\t") for line in log.read_text().splitlines())
                       if len(cols) >= 3 and int(cols[0]) >= cutoff and cols[1] == "200")
    if not durations:
        raise RuntimeError(f"h2load logged no measured request:\n{out.stdout}")
    return {"rps": float(rate.group(1)), "requests": int(summary.group(3)),
            "errors": int(summary.group(4)) + int(summary.group(5)) + int(summary.group(6)),
            "p50_us": durations[len(durations) // 2],
            "p99_us": durations[min(len(durations) - 1, int(len(durations) * 0.99))]}


def _sampled(client: Client, bench: Bench, stop: threading.Event, failures: list[str],
             counter: list[int]) -> None:
    i = 0
    while not stop.wait(0.05):
        row = i % len(bench.rows)
        try:
            got = client.answer([bench.rows[row]])
            if not measure.same(got, [bench.want[MODEL][row]]):
                failures.append(f"row {row}: {got!r}")
        except Exception as exc:
            failures.append(f"row {row}: {exc!r:.200}")
        counter[0] += 1
        i += 1


def grpc_load(bench: Bench, results: dict[str, Any]) -> None:
    """Every gRPC-capable full server in turn, rounds rotating; medians over the rounds."""
    names = [n for n in bench.names if bench.server(n).grpc and bench.server(n).full
             and "failed" not in results["servers"][n]]
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(bench.plan.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            server = bench.server(name)
            try:
                proc, _ = bench.start(server, (MODEL,), f"grpc-{r}", grpc=True)
            except Exception as exc:
                traceback.print_exc()
                results["servers"][name]["grpc_failed"] = repr(exc)
                continue
            try:
                measure.wait_ready(lambda s=server: _answers(s.grpc_port), proc, 60)
                runs.setdefault(name, []).append(_one(bench, server, r))
            finally:
                measure.stop(proc)
    for name, figures in runs.items():
        results["servers"][name]["grpc"] = {
            key: statistics.median(f[key] for f in figures) for key in ("rps", "p50_us", "p99_us")}
        results["servers"][name]["grpc"].update(errors=sum(f["errors"] for f in figures),
                                                rounds=figures)


def _answers(port: int) -> bool:
    client = Client(port, MODEL)
    try:
        client.answer([[0.0] * 30])
        return True
    except Exception:
        return False
    finally:
        client.close()


def _one(bench: Bench, server: Any, r: int) -> dict[str, Any]:
    label = f"{server.name}/grpc/{MODEL}/c={CONCURRENCY}"
    client = Client(server.grpc_port, MODEL)
    try:
        client.check_all(bench.rows, bench.want[MODEL], label)
        body = bench.out / "bodies" / f"{server.name}-grpc.bin"
        body.parent.mkdir(parents=True, exist_ok=True)
        body.write_bytes(frame(request(MODEL, bench.rows[:1])))
        stop, failures, counter = threading.Event(), [], [0]
        sampler = threading.Thread(target=_sampled, args=(client, bench, stop, failures, counter))
        sampler.start()
        try:
            result = h2load(server.grpc_port, body, bench.plan.seconds, bench.plan.warmup,
                            bench.out / "run" / f"{server.name}-grpc-{r}.log")
        finally:
            stop.set()
            sampler.join(60)
        if failures:
            raise measure.CheckFailed(f"{label}: {len(failures)} sampled answers wrong, e.g. "
                                      f"{failures[0]}")
        client.check_all(bench.rows, bench.want[MODEL], label)
    finally:
        client.close()
    result["sampled"] = counter[0]
    bench.log(f"{label}: {result['rps']:.0f} rps, p50 {result['p50_us'] / 1e3:.2f} ms, p99 "
              f"{result['p99_us'] / 1e3:.2f} ms, errors {result['errors']}, "
              f"{result['sampled']} sampled")
    return result
