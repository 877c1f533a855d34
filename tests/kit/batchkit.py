"""Helpers for batch prediction job tests: waiting for a job, reading its output shards, and
finding the pipeline processes a server started."""

from __future__ import annotations

import ast
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
#: Longest a test waits for jobs to end: a bound, not a target. A job's first runner imports
#: Beam and its framework, which takes minutes on a loaded machine (batch.runners.START_S).
SETTLE_S = 600.0


def wait_job(ml: Any, name: str, until: tuple[str, ...] = TERMINAL, timeout: float = SETTLE_S,
             check: Any = None) -> dict[str, Any]:
    """Poll jobs.get until the job's state is in `until` (and `check(job)` holds, if given)."""
    deadline = time.monotonic() + timeout
    while True:
        job = dict(ml.projects().jobs().get(name=name).execute())
        if job["state"] in until and (check is None or check(job)):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {name} not in {until} after {timeout}s: {job}")
        time.sleep(0.2)


def prediction_job(job_id: str, inputs: list[str], output: str, data_format: str = "JSON",
                   **more: Any) -> dict[str, Any]:
    return {"jobId": job_id, "predictionInput": {
        "dataFormat": data_format, "inputPaths": inputs, "outputPath": output,
        "region": "us-central1", **more}}


def shard_lines(texts: dict[str, str], basename: str) -> list[str]:
    """Every line of the shards `basename-NNNNN-of-MMMMM` among `texts` (name -> content), and
    the shard names must be numbered 0..M-1 of M."""
    names = sorted(n for n in texts if n.startswith(basename + "-"))
    assert names, f"no {basename} shards in {sorted(texts)}"
    total = len(names)
    assert names == [f"{basename}-{i:05d}-of-{total:05d}" for i in range(total)], names
    return [line for n in names for line in texts[n].splitlines() if line]


def local_outputs(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in directory.iterdir() if p.is_file()}


def results(texts: dict[str, str]) -> list[Any]:
    return [json.loads(line) for line in shard_lines(texts, "prediction.results")]


def error_stats(texts: dict[str, str]) -> dict[str, int]:
    """prediction.errors_stats lines, `('message', count)`, as a dict."""
    pairs = [ast.literal_eval(line) for line in shard_lines(texts, "prediction.errors_stats")]
    return {message: count for message, count in pairs}


def _processes() -> Iterator[tuple[int, list[str], bytes]]:
    """(pid, /proc/PID/stat fields after the command name, command line) of every live process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if fields[0] != "Z":
            yield int(entry), fields, cmdline


def pipeline_pids(state_dir: Path) -> list[int]:
    """Live batch job processes working for the server with this state directory: the children
    of its job runners (`python -m batch.runner JOBS_DIR ...`, batch/runner.py) that lead a
    process group (their own forks, the fork server and workers, are in that group)."""
    marker = b"\x00" + str(state_dir / "jobs").encode() + b"\x00"
    runners = {pid for pid, _, cmdline in _processes()
               if b"-m\x00batch.runner\x00" in cmdline and marker in cmdline}
    return [pid for pid, fields, _ in _processes()
            if int(fields[1]) in runners and int(fields[2]) == pid]


def group_members(pgid: int) -> list[int]:
    """Live processes in process group `pgid` (a pipeline and the Beam workers it started)."""
    return [pid for pid, fields, _ in _processes() if int(fields[2]) == pgid]


def children(pid: int) -> list[int]:
    """Live child processes of `pid`."""
    return [p for p, fields, _ in _processes() if int(fields[1]) == pid]


def live(pids: list[int]) -> list[int]:
    """Those of `pids` still alive (zombies count as gone)."""
    alive = {pid for pid, _, _ in _processes()}
    return [pid for pid in pids if pid in alive]


def slow_predictor(seconds: float) -> str:
    """The source of a custom prediction routine module, `slow_predictor.SlowPredictor`, that
    sums each row and takes `seconds` per call: a job over a few hundred rows runs a while."""
    return f'''
import time


class SlowPredictor:
    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        time.sleep({seconds!r})
        return [sum(row) for row in instances]
'''
