"""Measurements: wrk load runs, sampled and full answer checks, single big requests, cold start,
process-tree memory."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import re
import signal
import subprocess
import threading
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


def _json_request(method: str, url: str, body: bytes | None, timeout: float
                  ) -> tuple[int, Any]:
    """The status and JSON answer of one request (the text when the answer is not JSON)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, parts.path, body, headers)
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, data.decode(errors="replace")


def post(url: str, body: bytes, timeout: float = 60.0) -> tuple[int, Any]:
    return _json_request("POST", url, body, timeout)


def get_status(url: str, timeout: float = 5.0) -> int:
    """The HTTP status of a GET (0 when the server does not answer)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", parts.path)
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError:
        return 0
    finally:
        conn.close()


def get_json(url: str, timeout: float = 30.0) -> tuple[int, Any]:
    """The status and JSON answer of a GET (the text when the answer is not JSON)."""
    return _json_request("GET", url, None, timeout)


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


def memory(pid: int, pids: list[int] | None = None) -> dict[str, float]:
    """RSS and PSS (MiB) summed over the process tree (or over `pids`, a tree already found),
    from /proc/PID/smaps_rollup."""
    rss = pss = anon = 0
    pids = tree(pid) if pids is None else pids
    for p in pids:
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        rss += int(re.search(r"^Rss:\s+(\d+)", text, re.M).group(1))  # type: ignore[union-attr]
        pss += int(re.search(r"^Pss:\s+(\d+)", text, re.M).group(1))  # type: ignore[union-attr]
        found = re.search(r"^Pss_Anon:\s+(\d+)", text, re.M)  # Linux 5.10 and later
        anon += int(found.group(1)) if found else 0
    # Anonymous pages are shared only within the tree (copy-on-write after fork), so their PSS
    # does not move with what other servers on the machine map, as the libraries' pages do.
    return {"rss_mib": rss / 1024, "pss_mib": pss / 1024, "pss_anon_mib": anon / 1024,
            "processes": len(pids)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the live process tree (/proc/PID/stat utime and stime):
    a server's own cost, which other work on a shared machine moves far less than its speed."""
    ticks = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # stat fields 14 and 15 (proc(5))
    return ticks / os.sysconf("SC_CLK_TCK")


def wrk(url: str, body_file: Path, connections: int, seconds: float, script: Path = LUA,
        env: dict[str, str] | None = None) -> dict[str, Any]:
    """One timed wrk run (status checks only; see post.lua); requests/s and latency figures."""
    threads = 1 if connections == 1 else 2
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "10s",
         "-s", str(script), url], env={**os.environ, "BENCH_BODY": str(body_file), **(env or {})},
        capture_output=True, text=True, check=True, timeout=seconds + 60)
    line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{out.stdout}\n{out.stderr}")
    result = json.loads(line.removeprefix("BENCH_JSON "))
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    result["errors"] = result["non_2xx"] + result["socket_errors"] + result["timeouts"]
    return result


class Sampler:
    """Checks answers during a timed run: one request every `interval` seconds on its own
    connection, each with its own row, checked in full against that row's prediction.

    The load generator only counts statuses (post.lua); this catches a server that answers 200
    with wrong predictions under load, at a cost of a few requests per second, the same for
    every server. Use as a context manager around the timed run."""

    def __init__(self, url_body: Callable[[list[Any]], tuple[str, bytes]],
                 read: Callable[[Any], list[Any]], rows: list[list[float]], want: list[Any],
                 label: str, interval: float = 0.05) -> None:
        self.url_body, self.read, self.rows, self.want = url_body, read, rows, want
        self.label, self.interval = label, interval
        self.checked = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(self.interval):
            row = i % len(self.rows)
            url, body = self.url_body([self.rows[row]])
            try:
                status, answer = post(url, body, timeout=30)
                good = status == 200 and same(self.read(answer), [self.want[row]])
            except (OSError, KeyError, TypeError, ValueError) as exc:
                status, answer, good = 0, repr(exc), False
            if not good:
                self.failures.append(f"row {row}: {status} {answer!r:.200}")
            self.checked += 1
            i += 1

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.failures:
            raise CheckFailed(f"{self.label}: {len(self.failures)} of {self.checked} sampled "
                              f"answers wrong, e.g. {self.failures[0]}")


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
