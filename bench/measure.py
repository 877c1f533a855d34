"""Measurements: wrk load runs, single big requests, cold start, process-tree memory, checks."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

LUA = Path(__file__).resolve().parent / "post.lua"


class CheckFailed(AssertionError):
    """A server answered something other than the in-process prediction."""


def same(got: Sequence[Any], want: Sequence[Any]) -> bool:
    """Predictions agree: labels exactly, probabilities to float32 precision."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if isinstance(w, float) or isinstance(g, float):
            if not math.isclose(float(g), float(w), rel_tol=2e-6, abs_tol=1e-6):
                return False
        elif g != w:
            return False
    return True


def post(url: str, body: bytes, timeout: float = 60.0) -> tuple[int, Any]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", parts.path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, data.decode(errors="replace")


def wait_ready(predict: Callable[[], bool], proc: subprocess.Popen[bytes], limit: float) -> float:
    """Seconds from now until `predict()` returns True (a correct prediction)."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering")
        try:
            if predict():
                return time.perf_counter() - start
        except OSError:
            pass
        time.sleep(0.02)
    raise TimeoutError(f"no correct prediction within {limit} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server and everything it started (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def tree(pid: int) -> list[int]:
    """pid and every descendant (from /proc/*/stat parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def memory(pid: int) -> dict[str, float]:
    """RSS and PSS (MiB) summed over the process tree, from /proc/PID/smaps_rollup."""
    rss = pss = 0
    pids = tree(pid)
    for p in pids:
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        rss += int(re.search(r"^Rss:\s+(\d+)", text, re.M).group(1))  # type: ignore[union-attr]
        pss += int(re.search(r"^Pss:\s+(\d+)", text, re.M).group(1))  # type: ignore[union-attr]
    return {"rss_mib": rss / 1024, "pss_mib": pss / 1024, "processes": len(pids)}


def wrk(url: str, body_file: Path, field: str, connections: int, seconds: float) -> dict[str, Any]:
    threads = 1 if connections == 1 else 2
    env = {**os.environ, "BENCH_BODY": str(body_file), "BENCH_FIELD": field}
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "10s",
         "-s", str(LUA), url], env=env, capture_output=True, text=True, check=True,
        timeout=seconds + 60)
    line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{out.stdout}\n{out.stderr}")
    result = json.loads(line.removeprefix("BENCH_JSON "))
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    return result


def check_wrk(result: dict[str, Any], want: Sequence[Any], label: str) -> int:
    """Errors in a wrk run: non-200 answers, answers differing from each thread's first, and
    first answers differing from the in-process prediction."""
    errors = result["not_ok"] + result["mismatches"] + result["socket_errors"] + result["timeouts"]
    for first in result["firsts"]:
        if first is not None and not same(first, want):
            raise CheckFailed(f"{label}: answered {first!r}, expected {want!r}")
    return int(errors)


def check_distinct(url_body: Callable[[list[Any]], tuple[str, bytes]],
                   read: Callable[[Any], list[Any]], rows: list[list[float]],
                   want: list[Any], label: str, concurrency: int = 16) -> None:
    """Concurrent single-row requests with distinct rows: each answer is its own row's."""
    def one(i: int) -> None:
        url, body = url_body([rows[i]])
        status, answer = post(url, body)
        if status != 200 or not same(read(answer), [want[i]]):
            raise CheckFailed(f"{label}: row {i} answered {status} {answer!r:.200}, want {want[i]!r}")

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(len(rows))))


class BigClient:
    """One keep-alive connection posting one large body to one server.

    Calling it returns the answer's bytes (timed by the caller); `check` then compares them with
    the in-process prediction, outside the timing."""

    def __init__(self, url: str, body: bytes, read: Callable[[Any], list[Any]], want: list[Any],
                 label: str) -> None:
        parts = urlsplit(url)
        self.path, self.body, self.read, self.want, self.label = parts.path, body, read, want, label
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)

    def __call__(self) -> bytes:
        self.conn.request("POST", self.path, self.body, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise CheckFailed(f"{self.label}: HTTP {response.status}: {data[:300]!r}")
        return data

    def check(self, data: bytes) -> None:
        if not same(self.read(json.loads(data)), self.want):
            raise CheckFailed(f"{self.label}: predictions differ from the in-process ones")

    def close(self) -> None:
        self.conn.close()


Contestant = tuple[Callable[[], Any], Callable[[Any], None] | None]


def interleaved(contestants: dict[str, Contestant], repeats: int) -> dict[str, dict[str, float]]:
    """Best and median latency of each contestant's call, the contestants taking turns.

    Each contestant is (call, check): one unmeasured call first; then `repeats` rounds in which
    every contestant is called once, the order rotating, so a burst of other work on a shared
    machine hits all of them alike instead of whichever ran its repeats during it. `check`, if
    any, runs on every result outside the timing (every server answer is checked)."""
    names = list(contestants)
    times: dict[str, list[float]] = {name: [] for name in names}
    for call, check in contestants.values():
        result = call()
        if check is not None:
            check(result)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            call, check = contestants[name]
            start = time.perf_counter()
            result = call()
            times[name].append(time.perf_counter() - start)
            if check is not None:
                check(result)
    out = {}
    for name, runs in times.items():
        runs.sort()
        out[name] = {"median_s": runs[len(runs) // 2], "min_s": runs[0]}
    return out
