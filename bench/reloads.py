"""First load against reload after eviction, per framework, in one process with every framework
imported first (so neither timing pays for an import): what bench/thousand.py runs in a fresh
process. Prints {framework: {first_s, reload_s, ...}} as JSON (`summary` says what each holds).

Usage: python -m bench.reloads SPEC.json (SPEC: {"dirs": {name: dir}, "kinds": {name: kind},
"sources": {name: template dir}, "cap_mib": N}; the layout's versions fill a Deployments with
that byte cap, and the timed versions are fresh copies of one template per framework).

How (bench/notes/thousand.md, "Reload against first load, resolved"): single loads of a few
milliseconds on a shared machine swing by more than the 10 % judged, so the timed loads come in
pairs, many of them, and each pair times a first load and a reload next to each other so that
drift over the run falls on both alike. Every timed version of a framework is a copy of one of
its templates, the middle one by size, so that all its samples do the same model work: the
median of a mix of sizes falls inside whichever size is in the middle, with a fraction of the
samples. Versions are timed in rounds of BATCH slots per framework: round r first-loads new
copies, and in the same slot reloads the copy round r - 1 first-loaded, which the layout's
versions loaded between the rounds pushed out under the cap. Which of a pair runs first
alternates. Every timed load starts from the same state: the cap full (each load evicts), after
a garbage collection and a malloc_trim, and its victims kept referenced until the clock stops
(freeing them is the eviction's cost, and varies with which version the victim was).
"""

from __future__ import annotations

import gc
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.servers import framework

#: Pairs (first load, reload) timed per framework.
SAMPLES = 80
#: Pairs per framework per round: what one push-out of the cap (hundreds of loads) serves.
BATCH = 20


@dataclass(frozen=True)
class Step:
    """One timed load: `kind`'s copy made for (`round`, `slot`), loaded for the first time or
    reloaded; `counted` False for the first round's first loads (they have no partner)."""

    kind: str
    round: int
    slot: int
    reload: bool
    counted: bool = True


def plan(kinds: Iterable[str], samples: int = SAMPLES, batch: int = BATCH) -> list[list[Step]]:
    """The timed loads, round by round (the cap is pushed out between rounds): round 0 first-loads
    `batch` copies of each kind; each later round pairs, slot by slot and kind by kind, a first
    load of a new copy with the reload of the copy of the same slot from the round before, in an
    order that alternates; `samples` pairs a kind in all (rounded up to whole rounds)."""
    kinds = sorted(kinds)
    rounds = -(-samples // batch)
    out = [[Step(k, 0, s, reload=False, counted=False) for s in range(batch) for k in kinds]]
    for r in range(1, rounds + 1):
        steps = []
        for s in range(batch):
            for i, k in enumerate(kinds):
                pair = [Step(k, r, s, reload=False), Step(k, r - 1, s, reload=True)]
                steps += pair[::-1] if (r + s + i) % 2 else pair
        out.append(steps)
    return out


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), interpolated between the sample's values."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summary(first: list[float], again: list[float]) -> dict[str, Any]:
    """One framework's figures from its pairs (first[i] and again[i] timed together): medians
    and interquartile ranges (third quartile - first) of first loads and reloads (seconds), the
    ratio of the medians (what bench/targets.py judges), and the median and quartiles of the
    pairs' own ratios (their spread is the measurement's noise)."""
    if len(first) != len(again) or not first:
        raise ValueError("summary needs the same number (> 0) of first loads and reloads")
    ratios = [b / a for a, b in zip(first, again, strict=True) if a]
    f1, f, f3 = quartiles(first)
    r1, r, r3 = quartiles(again)
    return {"first_s": f, "reload_s": r, "first_iqr_s": f3 - f1, "reload_iqr_s": r3 - r1,
            "ratio": r / f if f else None,
            "paired_ratio": statistics.median(ratios) if ratios else None,
            "paired_ratio_quartiles": [quartiles(ratios)[0], quartiles(ratios)[2]] if ratios else None,
            "samples": len(first)}


def main(spec_file: str) -> None:
    """In this process: import every framework by loading one copy of each, fill the cap with
    the layout's versions, then run `plan`, pushing each round's copies out in between."""
    from registry.deployments import Deployments
    from registry.resources import Version

    spec = json.loads(Path(spec_file).read_text())
    dirs, kinds, sources = spec["dirs"], spec["kinds"], spec["sources"]
    pools: dict[str, set[str]] = {}
    for name in dirs:
        pools.setdefault(kinds[name], set()).add(sources[name])
    templates = {kind: _middle(pool) for kind, pool in pools.items()}

    def version(name: str, uri: str) -> Version:
        return Version(name=f"projects/bench/models/{name}/versions/v1", deployment_uri=uri,
                       framework=framework(Path(uri)), state="READY", uid="u1")

    with tempfile.TemporaryDirectory() as tmp:
        def copy(kind: str, r: int | str, slot: int) -> Version:
            target = Path(tmp) / f"{kind}-{r}-{slot}"
            if not target.exists():
                shutil.copytree(templates[kind], target)
            return version(target.name, str(target))

        d = Deployments(Path(tmp) / "packages", max_bytes=spec["cap_mib"] << 20)
        for kind in templates:  # frameworks imported: neither timing pays for it
            d.get(copy(kind, "import", 0))
        layout = [version(name, dirs[name]) for name in sorted(dirs)]
        fillers = itertools.cycle(layout)
        rounds = plan(templates, SAMPLES, BATCH)
        # Both timings in the same state: the cache full (each load evicts), as a server's is
        # once its set does not fit (the collector then walks every live model).
        for filler in itertools.islice(fillers, len(layout)):
            if d.evicted:
                break
            d.get(filler)
        first: dict[str, list[float]] = {k: [] for k in templates}
        again: dict[str, list[float]] = {k: [] for k in templates}
        measured = True
        for n, steps in enumerate(rounds):
            for step in steps:
                v = copy(step.kind, step.round, step.slot)
                if step.reload and d.is_loaded(v):
                    measured = False  # the layout is too small to push it out: not a reload
                seconds = _timed(d, v)
                if step.counted:
                    (again if step.reload else first)[step.kind].append(seconds)
            if n + 1 < len(rounds):  # this round's new copies reload in the next one
                news = [copy(s.kind, s.round, s.slot) for s in steps if not s.reload]
                measured = measured and _push_out(d, news, fillers, len(layout))
        out = {k: summary(first[k], again[k]) for k in sorted(first)} if measured else {}
    print(json.dumps(out))


def _middle(paths: Iterable[str]) -> str:
    """The middle of `paths` by size on disk (the larger of two middles)."""
    from registry import footprint

    ordered = sorted(paths, key=lambda p: (footprint.disk_size(p), p))
    return ordered[len(ordered) // 2]


def _push_out(d: Any, versions: list[Any], fillers: Iterable[Any], layout_size: int) -> bool:
    """Load the layout's versions in turn until none of `versions` is loaded (at most twice round
    the layout): whether they all went."""
    for filler in itertools.islice(fillers, 2 * layout_size):
        if not any(d.is_loaded(v) for v in versions):
            return True
        d.get(filler)
    return not any(d.is_loaded(v) for v in versions)


def _timed(d: Any, v: Any) -> float:
    """The loading thread's CPU seconds for d.get(v), started from a collected, trimmed heap."""
    from registry import footprint

    gc.collect()  # a collection left over from the previous load is not this one's
    footprint.release_freed_memory()
    held = d.loaded()  # the victims this load evicts are freed after the clock stops
    # This thread's CPU: a load runs in the caller's thread, and the process's CPU would also
    # count XGBoost's OpenMP threads spinning after their last call.
    start = time.thread_time()
    d.get(v)
    seconds = time.thread_time() - start
    del held
    return seconds


if __name__ == "__main__":
    main(sys.argv[1])
