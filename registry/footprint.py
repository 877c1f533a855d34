"""How much memory a loaded version is taken to hold, and which loaded versions the caps on a
serving process (MLEMU_MAX_LOADED_VERSIONS, MLEMU_MAX_LOADED_MB) unload after a load.

The estimate is the model directory's size on disk times a per-framework factor, plus a fixed
overhead for what the server keeps per version (its predictor wrapper, batcher and metric
rows). It is taken from the files, not from the process's memory around the load, because loads
run in many threads at once (a resident-set delta would count a neighbour's load) and the first
load of a framework also pays for importing the library, which later versions share. The
factors were measured as the proportional set size (PSS) a process grows by per extra loaded
copy of bench/models.py's models against their size on disk (bench/notes/thousand.md):
scikit-learn pickles and XGBoost JSON models load into about their size on disk (0.85-1.05x); a
TensorFlow SavedModel adds about 1 MiB of graph and session whatever its size (a 25 KB
SavedModel grew the process by 0.94 MiB).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: Bytes the server holds per loaded version besides the model (measured as PSS per extra
#: loaded LogisticRegression version in bench/many.py: well under this).
OVERHEAD = 256 * 1024

#: Bytes of proportional set size (PSS) a version that was loaded in a process and then unloaded
#: still holds there, counted against the byte cap beside the loaded models. Its own objects are
#: few (its load lock, the name the cap unloaded, its lastUseTime throttle, its serving-lookup
#: cache entry, its metric series or, in one process, its metric label children), but they are
#: allocated among the load's objects and keep the allocator's pages and arenas they sit in from
#: being handed back when the model is freed. It is per version served, not per load. Measured
#: by metrics mode (bench/notes/thousand.md, "The residue, measured", and the anonymous memory
#: of the thousand-version server in "Startup and the metric files' pages"); with metrics off
#: it was not measured apart. The metric file's pages are not in it: a process unmaps them after
#: an unload (metric_files.release_pages).
RESIDUE = {"multiprocess": 88 * 1024, "one process": 112 * 1024, "metrics off": 80 * 1024}

#: (fixed bytes, bytes per byte on disk) a loaded model takes, by the version's framework (""
#: for custom code, whose model files say little about what its class builds from them).
FACTORS: dict[str, tuple[int, float]] = {
    "SCIKIT_LEARN": (0, 1.25),
    "XGBOOST": (0, 1.25),
    "TENSORFLOW": (1 << 20, 2.0),
    "": (0, 2.0),
}

#: Files a size estimate reads at most (a model directory with more is sized by these).
MAX_FILES = 10_000


def disk_size(model_dir: str) -> int:
    """Bytes of the regular files under `model_dir` (symbolic links not followed)."""
    total, seen = 0, 0
    for root, dirs, files in os.walk(model_dir):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in files:
            seen += 1
            if seen > MAX_FILES:
                return total
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(root, name)):
                total += st.st_size
    return total


def estimate(model_dir: str, framework: str) -> int:
    """A version's estimated memory once loaded, in bytes (see the module docstring)."""
    fixed, factor = FACTORS.get(framework.upper(), FACTORS[""])
    return OVERHEAD + fixed + int(disk_size(model_dir) * factor)


def residue(metrics: bool, multiprocess: bool) -> int:
    """What each version loaded and then unloaded still holds (RESIDUE) in such a process."""
    if not metrics:
        return RESIDUE["metrics off"]
    return RESIDUE["multiprocess" if multiprocess else "one process"]


def evictions(others: Iterable[tuple[int, str, int]], kept_bytes: int, max_count: int,
              max_bytes: int, unloaded: int = 0, residue: int = 0) -> list[str]:
    """Which loaded versions to unload after one was loaded, least recently used first.

    `others` are the other loaded versions as (last use, name, estimated bytes); `kept_bytes` is
    the estimate of the one just loaded, which always stays (a version that alone exceeds
    `max_bytes` still serves: every other is unloaded and it is the first to go at the next
    load). `unloaded` versions the process loaded before hold `residue` bytes each, and so does
    each version unloaded now: they count against `max_bytes` too, so the more versions a
    process has served, the less room its loaded models get (when the residue alone is over
    the cap, only the version just loaded stays). A bound of 0 is no bound.
    """
    ordered = sorted(others)
    count = len(ordered) + 1
    total = kept_bytes + sum(size for _, _, size in ordered) + unloaded * residue
    out = []
    for _, name, size in ordered:
        over_count = max_count > 0 and count > max_count
        over_bytes = max_bytes > 0 and total > max_bytes
        if not (over_count or over_bytes):
            break
        out.append(name)
        count -= 1
        total -= size - residue
    return out


def has_room(count: int, total: int, max_count: int, max_bytes: int) -> bool:
    """Whether another version may be loaded without unloading one (warm-up stops when not);
    `total` counts the unloaded versions' residue too."""
    return (max_count <= 0 or count < max_count) and (max_bytes <= 0 or total < max_bytes)


def caps_text(max_count: int, max_bytes: int) -> str:
    """The caps in force, for the log line of an unload."""
    caps = []
    if max_count > 0:
        caps.append(f"{max_count} loaded versions (MLEMU_MAX_LOADED_VERSIONS)")
    if max_bytes > 0:
        caps.append(f"{max_bytes / 2**20:.0f} MiB of loaded models and unloaded ones' residue "
                    "(MLEMU_MAX_LOADED_MB)")
    return " or ".join(caps)


def release_freed_memory() -> bool:
    """Hand the memory freed by unloaded models back to the system (glibc's malloc_trim), so
    the process's resident memory follows what stays loaded rather than its high-water mark.
    False where the C library has no malloc_trim (not glibc)."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True
