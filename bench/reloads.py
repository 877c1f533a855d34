"""First load against reload after eviction, per framework, in one process with every framework
imported first (so neither timing pays for an import): what bench/thousand.py runs in a fresh
process. Prints {framework: {first_s, reload_s, samples}} (medians of the loading thread's CPU
seconds) as JSON.

Usage: python -m bench.reloads SPEC.json (SPEC: {"dirs": {name: dir}, "kinds": {name: kind},
"cap_mib": N}; versions are pushed out under a Deployments with that byte cap).
"""

from __future__ import annotations

import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.servers import framework

#: Versions of each framework timed (fewer if the layout has fewer).
SAMPLES = 7


def main(spec_file: str) -> None:
    """In this process: import every framework by loading one version of each, fill the cap,
    then for up to SAMPLES other versions of each framework time the first load, push it out
    under the cap by loading others, and time its reload."""
    from registry.deployments import Deployments
    from registry.resources import Version

    spec = json.loads(Path(spec_file).read_text())
    dirs, kinds = spec["dirs"], spec["kinds"]

    def version(name: str) -> Version:
        return Version(name=f"projects/bench/models/{name}/versions/v1", deployment_uri=dirs[name],
                       framework=framework(Path(dirs[name])), state="READY", uid="u1")

    with tempfile.TemporaryDirectory() as tmp:
        d = Deployments(Path(tmp), max_bytes=spec["cap_mib"] << 20)
        by_kind: dict[str, list[str]] = {}
        for name, kind in kinds.items():
            by_kind.setdefault(kind, []).append(name)
        for kind, names in by_kind.items():  # frameworks imported: neither timing pays for it
            copy = Path(tmp) / f"import-{kind}"
            shutil.copytree(dirs[names[0]], copy)
            d.get(Version(name=f"projects/bench/models/import-{kind}/versions/v1",
                          deployment_uri=str(copy), framework=framework(copy), state="READY",
                          uid="u1"))
        picks = {kind: names[:SAMPLES] for kind, names in by_kind.items()}
        fillers = [n for n in kinds if all(n not in p for p in picks.values())]
        # Both timings in the same state: the cache full (each load evicts), as a server's is
        # once its set does not fit. First loads into a near-empty process ran faster than
        # reloads among 185 MiB of live models only because of that (the garbage collector
        # walks every live object), not because they were first.
        for filler in fillers:
            if d.evicted:
                break
            d.get(version(filler))
        out: dict[str, Any] = {}
        for kind, picked in sorted(picks.items()):
            first, again = [], []
            for name in picked:
                v = version(name)
                loaded = _cpu(lambda v=v: d.get(v))  # type: ignore[misc]
                for filler in fillers:
                    if not d.is_loaded(v):
                        break
                    d.get(version(filler))
                if d.is_loaded(v):  # the others fit beside it (a small layout): not a reload
                    continue
                first.append(loaded)
                again.append(_cpu(lambda v=v: d.get(v)))  # type: ignore[misc]
            if again:  # else not measured: the target's row says so
                out[kind] = {"first_s": statistics.median(first),
                             "reload_s": statistics.median(again), "samples": len(again)}
    print(json.dumps(out))


def _cpu(fn: Any) -> float:
    gc.collect()  # a collection left over from the previous load is not this one's
    # This thread's CPU: a load runs in the caller's thread, and the process's CPU would also
    # count XGBoost's OpenMP threads spinning after their last call.
    start = time.thread_time()
    fn()
    return time.thread_time() - start


if __name__ == "__main__":
    main(sys.argv[1])
