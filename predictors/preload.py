"""Importing frameworks once in gunicorn's master, before it forks the workers.

Workers then start without importing scikit-learn/XGBoost themselves (faster cold start) and share
the imported modules' memory copy-on-write (less memory per worker). This is only safe because
nothing forked has threads: fork copies only the calling thread, so a thread pool started before
the fork would be a dead pool in every worker. Hence:

- The imports start no pool: XGBoost's OpenMP pool starts at its first call, TensorFlow's
  intra- and inter-op pools with its first session or eager context (a model load), both in each
  worker after the fork. TensorFlow's import alone runs its static registrations and builds its
  Python modules, and starts no OS thread (tests/predictors/test_preload.py counts them, and
  forks workers that load and run a SavedModel); that import is most of a TensorFlow worker's
  private memory, which the workers now share.
- BLAS (numpy's and scipy's OpenBLAS) starts its thread pool when the library loads. The master
  sets OPENBLAS_NUM_THREADS=1 (unless the user chose a value) before the first numpy import, so
  it loads without threads, and each worker computes BLAS on one thread: parallelism comes from
  the worker processes, the same policy as XGBoost's one thread per call.
- After importing, the master checks that it still runs one thread; if not, it says so loudly
  (the fork would still work for pure-Python modules, but a framework broke the rule).

A framework a worker imports itself (TensorFlow, for a version created after start) is frozen
there after its import, for the collector's sake rather than for sharing: see `freeze_imported`.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("mlemu.preload")

#: Framework -> the modules its models need in every worker (imported by unpickling or loading).
MODULES: dict[str, tuple[str, ...]] = {
    "SCIKIT_LEARN": ("numpy", "joblib", "sklearn.base", "sklearn.utils.validation",
                     "predictors.sklearn"),
    "XGBOOST": ("numpy", "xgboost", "predictors.xgboost"),
    "TENSORFLOW": ("numpy", "tensorflow", "predictors.tensorflow"),
}


def threads() -> int:
    """OS threads of this process (threading only sees Python's; native pools count here)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def single_threaded_blas(environ: dict[str, str] | os._Environ[str]) -> None:
    """Make numpy's OpenBLAS start no thread pool when it loads (unless the user chose a size).

    OpenBLAS starts its pool as numpy is first imported, and the app's own modules import numpy,
    so gunicorn's master calls this before importing anything: a pool started there would be
    forked into every worker. The workers inherit the setting (parallelism comes from them).
    """
    environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def preload(frameworks: Iterable[str], environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """Import the modules of `frameworks` (unknown ones and TENSORFLOW are skipped); returns them.

    `environ` is the process environment, passed in so that this module does not read it itself
    (settings.py is the only reader); only OPENBLAS_NUM_THREADS is set, and only if unset.
    """
    wanted: list[str] = []
    for framework in frameworks:
        for name in MODULES.get(framework.upper(), ()):
            if name not in wanted:
                wanted.append(name)
    if not wanted:
        return []
    single_threaded_blas(environ)
    before = threads()
    done = []
    for name in wanted:
        try:
            _import(name)
        except ImportError as exc:  # e.g. xgboost not installed: the worker will say so on load
            log.warning("not preloading %s: %s", name, exc)
            continue
        done.append(name)
    after = threads()
    if after > before:
        log.warning("preloading %s started %d thread(s); workers forked from here may hang in "
                    "those libraries", ", ".join(done), after - before)
    # Objects that exist now are never collected: the collector then never writes to their pages,
    # so the workers keep sharing them (https://docs.python.org/3/library/gc.html#gc.freeze).
    gc.freeze()
    return done


def _import(name: str) -> None:
    if name != "tensorflow":
        importlib.import_module(name)
        return
    from observability import logs

    # Its import prints banners to stderr whatever TF_CPP_MIN_LOG_LEVEL says: they go through
    # logging instead, as when a worker imports it (predictors/tensorflow.py).
    with logs.native_stderr("tensorflow"):
        importlib.import_module(name)


def freeze_imported(module: str, import_module: Callable[[], Any]) -> Any:
    """`import_module()` (which imports `module`); after its first import in this process, freeze
    every object then alive (gc.freeze), as the master does after `preload`.

    TensorFlow's import builds ~320,000 Python objects that live as long as the process. Left in
    the collector's generations, every full collection walks them all, a pause during which no
    thread of the worker runs (measured under load, bench/NOTES.md), whenever the oldest
    generation fills (the requests in flight keep promoting objects to it, and CPython collects it
    fully once those reach a quarter of it). Frozen, they are never walked again. Only the first
    import freezes: a model loaded later stays collectable, so unloading it frees it (its graph
    holds cycles).
    """
    first = module not in sys.modules
    imported = import_module()
    if first:
        gc.freeze()
    return imported
