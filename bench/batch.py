"""Batch prediction throughput (issue 19): a job over N instances (30 features, JSON lines) with
1 and 2 workers, against the in-process floor. `python -m bench.batch [--instances N]`; the full
bench (`python -m bench`) runs it too, with 1,000,000 instances.

- floor: a fresh process (`python -m bench.batch --floor`, timed from its start to its exit, as
  a job's process is) loads the model (importing its framework), reads the same file, decodes
  each line (orjson, the fastest decoder at hand; a job's workers decode with it too, as online
  prediction does), predicts in batches of `batchSize` with the same predictor code, and writes
  each batch's lines with the workers' own writer (batch/records.result_lines: the service's
  line format). No Beam: what a job costs over it is Beam's import, the pipeline and its
  runner. `floor_warm` is the same loop in the bench's own process, its framework already
  imported (the floor of the earlier runs; shown beside, not a target): it leaves out the one
  start-up cost a job cannot avoid, the model framework's import (~0.8 s with scikit-learn).
- job: the Beam pipeline as a job runs it on a server that has run a job of the same framework
  before (batch/launcher.Run on a warm runner, batch/runners.py: the job's process is forked by a
  runner that imported Beam and the framework; DirectRunner, 1 worker in memory, 2 forked by the
  job's fork server), from the hand-over to the end of the last shard. One untimed job first
  warms the runner, as a server's first job of a framework does. The peak resident memory of
  the pipeline's process tree is sampled once a second (bench/jobwatch.py, which says what it
  reads and why so little; bounded memory: no worker holds the whole input).
- cpu_s: CPU time (user + sys) of each run: the floor's own, a job's whole process tree (every
  Beam worker is a waited-for descendant of the job's process, whose runner reports its
  rusage). On a shared machine
  wall time says what the load left; CPU time says what the work costs.
- path_s: a job's CPU critical path, what its wall time would be with a free core per process:
  one worker runs in the pipeline's process (path = cpu_s); with two, the pipeline process's
  CPU until the first worker appears (its fork server, a fork of it, is ready at once), plus the
  busiest worker's CPU (sampled from /proc
  every 0.1 s; the pipeline process idles while its workers run). `w2_vs_w1_path` is the
  speed-up it implies. Peak PSS beside RSS: forked workers share their fork server's pages,
  which RSS counts once per process.
- wait_s: how long that critical path's threads were runnable but waiting for a CPU (their
  run-queue delay, /proc/PID/task/*/schedstat): what the machine's other load took from the job.
  free_s = the wall time less wait_s, the wall time the job would have had with its cores free
  (round trips and sleeps included, unlike path_s); `w2_vs_w1_free` is the speed-up it implies.
  Each process's busiest thread counts (it does the work; the others mostly wait on gRPC).
Targets: 1 worker >= 0.8x the floor, 2 workers >= 1.6x 1 worker. The order of the runs
alternates round by round, so drifting load on a shared machine hits each alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from batch.launcher import Run  # noqa: E402 - after the path set-up above
from batch.runners import Runners  # noqa: E402
from batch.spec import JobSpec  # noqa: E402
from bench import jobwatch, models  # noqa: E402

BATCH_SIZE = 64


def write_instances(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for start in range(0, n, 10000):
            rows = models.instances(min(10000, n - start), seed=start + 3)
            f.write("".join(json.dumps(r) + "\n" for r in rows))


def floor_work(model_dir: Path, inputs: Path, out: Path) -> int:
    """The job's work in a plain loop, in this process: the number of instances predicted."""
    import predictors
    from batch import records

    predictor, _ = predictors.load(str(model_dir))
    count = 0
    with open(inputs, "rb") as src, open(out, "w") as dst:
        batch: list[Any] = []
        for line in src:
            batch.append(orjson.loads(line))
            if len(batch) == BATCH_SIZE:
                dst.write(records.result_lines(predictor.predict(batch)) + "\n")
                count += len(batch)
                batch = []
        if batch:
            dst.write(records.result_lines(predictor.predict(batch)) + "\n")
            count += len(batch)
    return count


def floor(model_dir: Path, inputs: Path, out: Path) -> dict[str, float]:
    """Instances per second of a fresh process doing the job's work in a plain loop."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "bench.batch", "--floor", str(model_dir),
                           str(inputs), str(out)], cwd=str(HERE.parent), capture_output=True,
                          text=True, check=True)
    seconds = time.perf_counter() - started
    count = int(done.stdout.split()[-1])
    return {"rate": count / seconds, "seconds": seconds, "cpu_s": _children_cpu() - cpu}


def floor_warm(model_dir: Path, inputs: Path, out: Path) -> dict[str, float]:
    """The same loop in this process, its framework imported beforehand (not timed)."""
    import predictors

    predictors.load(str(model_dir))[0].close()
    started, cpu = time.perf_counter(), time.process_time()  # the model load is work, as in a job
    count = floor_work(model_dir, inputs, out)
    seconds = time.perf_counter() - started
    return {"rate": count / seconds, "seconds": seconds, "cpu_s": time.process_time() - cpu}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _yielding(target: Any, *args: Any) -> None:
    """Run `target` in this thread at the lowest CPU priority (Linux: a thread's own nice value):
    while a 2-worker job fills both cores, the watcher waits for the workers, not they for it."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    target(*args)


def job(model_dir: Path, inputs: Path, work: Path, workers: int, n: int,
        runners: Runners) -> dict[str, float]:
    shutil.rmtree(work, ignore_errors=True)
    spec = JobSpec(input_paths=[str(inputs)], data_format="JSON", output_path=str(work / "out"),
                   model_dir=str(model_dir), batch_size=BATCH_SIZE, workers=workers)
    started = time.perf_counter()
    run = Run(spec, work, runners)
    watch = jobwatch.Watch(run.proc.pid, workers if spec.forked_workers else 0)
    # Beside the wait, so the end is timed exactly (not to a poll).
    sampler = threading.Thread(target=_yielding, args=(watch.run, lambda: run.proc.returncode is None),
                               daemon=True)
    sampler.start()
    run.proc.wait()
    seconds = time.perf_counter() - started
    sampler.join()
    outcome = run.result()
    if outcome.get("predictions") != n:
        raise RuntimeError(f"{workers} worker(s): {outcome}")
    cpu_s = run.proc.cpu_s
    wait = watch.wait_s()
    return {"rate": n / seconds, "seconds": seconds, "cpu_s": cpu_s, "path_s": watch.path_s(cpu_s),
            "wait_s": wait, "free_s": seconds - wait,
            "peak_rss_mib": watch.peak[0], "peak_pss_mib": watch.peak[1]}


def _rounds(runs: dict[str, list[dict[str, float]]], rounds: int, model_dir: Path, inputs: Path,
            root: Path, n: int, runners: Runners) -> None:
    for i in range(rounds):
        order = ["floor", "w1", "w2", "floor_warm"]
        for name in order[i % 4:] + order[:i % 4]:
            if name.startswith("floor"):
                measure_floor = floor if name == "floor" else floor_warm
                runs[name].append(measure_floor(model_dir, inputs, root / "floor-out.json"))
            else:
                runs[name].append(job(model_dir, inputs, root / f"job-{name}", int(name[1]), n,
                                      runners))
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {runs[name][-1]}", flush=True)


def measure_all(root: Path, n: int, rounds: int, model: str = "logreg") -> dict[str, Any]:
    dirs = models.build(root / "models", with_tf=model == "tf")
    inputs = root / f"batch-{n}.json"
    if not inputs.exists():
        write_instances(inputs, n)
    runs: dict[str, list[dict[str, float]]] = {"floor": [], "floor_warm": [], "w1": [], "w2": []}
    runners = Runners(root / "runners", 3600.0)
    # The first job of a framework starts its runner (Beam's and the framework's import): the
    # figures are those of the jobs after it, as on a server that has run one.
    warm_up = root / "warm-up.json"
    write_instances(warm_up, 100)
    job(dirs[model], warm_up, root / "job-warm-up", 2, 100, runners)
    try:
        _rounds(runs, rounds, dirs[model], inputs, root, n, runners)
    finally:
        runners.close()
    rate = {k: statistics.median(r["rate"] for r in v) for k, v in runs.items()}
    cpu = {k: statistics.median(r["cpu_s"] for r in v) for k, v in runs.items()}
    path = {k: statistics.median(r["path_s"] for r in runs[k]) for k in ("w1", "w2")}
    free = {k: statistics.median(r["free_s"] for r in runs[k]) for k in ("w1", "w2")}
    return {"instances": n, "model": model, "batch_size": BATCH_SIZE, "rounds": rounds,
            "floor_rate": rate["floor"], "floor_warm_rate": rate["floor_warm"],
            "w1_rate": rate["w1"], "w2_rate": rate["w2"], "w1_vs_floor": rate["w1"] / rate["floor"],
            "w1_vs_floor_warm": rate["w1"] / rate["floor_warm"], "w2_vs_w1": rate["w2"] / rate["w1"],
            "cpu_s": cpu, "path_s": path, "w1_path_rate": n / path["w1"],
            "w2_path_rate": n / path["w2"], "w2_vs_w1_path": path["w1"] / path["w2"],
            "free_s": free, "w1_free_rate": n / free["w1"], "w2_free_rate": n / free["w2"],
            "w2_vs_w1_free": free["w1"] / free["w2"],
            "peak_rss_mib": {k: max(r["peak_rss_mib"] for r in runs[k]) for k in ("w1", "w2")},
            "peak_pss_mib": {k: max(r["peak_pss_mib"] for r in runs[k]) for k in ("w1", "w2")},
            "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.batch", description=__doc__)
    parser.add_argument("--instances", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="logreg", choices=sorted(models.MODELS))
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--floor", nargs=3, type=Path, metavar=("MODEL_DIR", "INPUTS", "OUT"),
                        help="run the floor's loop in this process and print its count")
    args = parser.parse_args()
    if args.floor:
        print(floor_work(*args.floor))
        sys.stdout.flush()
        os._exit(0)  # as a job's process ends (batch/__main__.py): no module teardown
    args.out.mkdir(parents=True, exist_ok=True)
    result = measure_all(args.out, args.instances, args.rounds, args.model)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
