"""Model calls and loads, seen from the deployments cache: timing and attribution.

Every protocol reaches a model through a predictor the deployments cache loaded, whichever of
its methods it calls (`predict`, or `predict_tensors` for TensorFlow's tensor-native paths).
`instrument` replaces those bound methods on the loaded object with timed ones that also mark
the thread as running that version's code, so a custom predictor's `print` and `logging` lines
are attributed to its model and version (AI Platform's onlinePredictionConsoleLogging). A call
made from inside another (TensorFlow's `predict` calls `predict_tensors`) is timed once.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import perf_counter
from typing import Any

from observability import context
from observability.metrics import VersionInstruments, short_names

_METHODS = ("predict", "predict_tensors")


def instrument(predictor: Any, version_name: str, instruments: VersionInstruments | None) -> None:
    """Time (when `instruments` is given) and attribute the model calls of `predictor`."""
    model, version = short_names(version_name)
    # The timed methods are stored on the predictor: they reach it through a weak reference, so
    # it holds no cycle through them and is freed as soon as the last request lets go of it.
    ref = weakref.ref(predictor)
    for name in _METHODS:
        function = getattr(type(predictor), name, None)
        if callable(function) and callable(getattr(predictor, name, None)):
            setattr(predictor, name, _observed(function, ref, model, version, instruments))


def _observed(function: Callable[..., Any], ref: weakref.ref[Any], model: str, version: str,
              instruments: VersionInstruments | None) -> Callable[..., Any]:
    who = (model, version)
    current = context.PREDICTOR

    @functools.wraps(function)
    def call(instances: Any, *args: Any, **kwargs: Any) -> Any:
        target = ref()  # alive: whoever called this holds the predictor
        if current.get() is not None:  # inside another model call (or a load)
            return function(target, instances, *args, **kwargs)
        token = current.set(who)
        started = perf_counter()
        try:
            return function(target, instances, *args, **kwargs)
        finally:
            if instruments is not None:
                instruments.model_call(perf_counter() - started, instances)
            current.reset(token)
    return call


@contextmanager
def attributed(version_name: str) -> Iterator[None]:
    """Attribute what runs inside (a model load: `from_path` may print too) to a version."""
    token = context.PREDICTOR.set(short_names(version_name))
    try:
        yield
    finally:
        context.PREDICTOR.reset(token)
