"""What a serving process keeps for every version it served and then unloaded, in one process
(bench/notes/thousand.md, "What stays after an unload").

An app built as `app.py serve` builds it (create_app: metrics on, request log off, a byte cap on
loaded models), N versions from bench/thousand.py's templates (LogisticRegression, small
RandomForests and XGBoost boosters), each predicted through the WSGI stack by THREADS threads
(Flask test clients: the observability middleware, the predict fast path, resolution,
batchers, bookkeeping), so the cap pushes nearly all of them out. Then the emulator's tick (which
trims the heap), a garbage collection, and: PSS (/proc/self/smaps_rollup) and, with --trace, the
tracemalloc difference grouped by traceback, against the same process before the N versions
(after one version of each framework served, so imports are not counted).

Usage: python -m bench.retained [--versions N] [--threads T] [--trace] [--multiprocess]
(--multiprocess: prometheus_client's multiprocess mode, as under gunicorn). Prints JSON last.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import tracemalloc
from pathlib import Path
from typing import Any


def pss_kib() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def _layout(root: Path, n: int) -> dict[str, Path]:
    """name -> model directory: every tenth from the fourth a forest, from the eighth a booster."""
    from bench import thousand

    base = root / "base"
    templates = thousand._templates(root / "templates", False, base)
    dirs = {}
    for i in range(n):
        kind = thousand.kind_of(i, n, False)
        pool = templates[kind]
        d = root / "versions" / f"m{i:04d}"
        if not d.exists():
            shutil.copytree(pool[(i // 10) % len(pool)], d)
        dirs[f"m{i:04d}"] = d
    return dirs


def metric_file_bytes(directory: Path) -> int:
    """Bytes used in this process's metric files (each file's first word, MmapedDict's layout)."""
    return sum(int.from_bytes(path.read_bytes()[:4], "little")
               for path in directory.glob(f"*_{os.getpid()}.db"))


def _settle(emu: Any) -> None:
    emu.instruments and emu.instruments.flush()
    emu.on_tick()
    gc.collect()
    from registry import footprint

    footprint.release_freed_memory()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", type=int, default=300)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--cap-mb", type=int, default=2)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--multiprocess", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mlemu-retained-"))
    if args.multiprocess:
        (tmp / "metrics").mkdir()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(tmp / "metrics")
    import logging

    import yaml

    from app import create_app
    from bench import models
    from bench.servers import framework
    from core.settings import Settings

    dirs = _layout(tmp, args.versions + 10)
    names = list(dirs)
    warm, served = names[args.versions:], names[:args.versions]
    config = {"projects": {"bench": {"models": {
        name: {"versions": {"v1": {"deploymentUri": str(d), "framework": framework(d)}}}
        for name, d in dirs.items()}}}}
    (tmp / "mlemu.yaml").write_text(yaml.safe_dump(config))
    settings = Settings(state_dir=tmp / "state", config_file=tmp / "mlemu.yaml",
                        max_loaded_mb=args.cap_mb)
    flask_app = create_app(settings, warm=False)
    logging.getLogger("mlemu").setLevel(logging.WARNING)  # an unload line per version
    emu = flask_app.extensions["mlemu"]
    body = {"instances": models.instances(1)}
    failures: list[str] = []

    def walk(order: list[str]) -> None:
        client = flask_app.test_client()
        for name in order:
            r = client.post(f"/v1/projects/bench/models/{name}:predict", json=body)
            if r.status_code != 200:
                failures.append(f"{name}: {r.status_code} {r.get_data(as_text=True)[:200]}")

    def serve(order: list[str]) -> None:
        threads = [threading.Thread(target=walk, args=(order[i:] + order[:i],))
                   for i in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    serve(warm)  # frameworks imported, threads' first rows made: not what is measured
    _settle(emu)
    if args.trace:
        tracemalloc.start(12)
    _settle(emu)
    before_pss = pss_kib()
    before_files = metric_file_bytes(tmp / "metrics")
    before = tracemalloc.take_snapshot() if args.trace else None
    serve(served)
    _settle(emu)
    after_pss = pss_kib()
    loaded = len(emu.deployments.loaded())
    out: dict[str, Any] = {
        "versions": args.versions, "threads": args.threads, "multiprocess": args.multiprocess,
        "loaded_after": loaded, "evicted": emu.deployments.evicted, "failures": failures[:3],
        "pss_kib_per_version": (after_pss - before_pss) / args.versions,
        "metric_file_bytes_per_version":
            (metric_file_bytes(tmp / "metrics") - before_files) / args.versions}
    if before is not None:
        after = tracemalloc.take_snapshot()
        stats = after.compare_to(before, "traceback")
        out["traced_bytes_per_version"] = sum(s.size_diff for s in stats) / args.versions
        # Grouped by the innermost frame of this repository (what made the object), then by
        # the full traceback's first project frames for the largest groups.
        root = str(Path(__file__).resolve().parent.parent)
        groups: dict[str, list[int]] = {}
        for stat in stats:
            own = [f for f in stat.traceback if f.filename.startswith(root)
                   and "/.venv/" not in f.filename]
            where = " <- ".join(f"{f.filename[len(root) + 1:]}:{f.lineno}"
                                for f in reversed(own[-3:])) if own else "(outside the repo)"
            g = groups.setdefault(where, [0, 0])
            g[0] += stat.size_diff
            g[1] += stat.count_diff
        top = sorted(groups.items(), key=lambda kv: -kv[1][0])[:15]
        out["top"] = {where: round(size / args.versions) for where, (size, _) in top}
        for where, (size, count) in top:
            print(f"{size / args.versions:8.0f} B/version {count:7d} blocks  {where}",
                  file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
