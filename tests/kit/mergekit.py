"""Adaptive batching's test helpers (tests/predictors/test_batching.py, test_batch_gathering.py):
a predict function that records its calls and holds the first at a gate, and a way to queue
requests behind that held call, so batches form deterministically (no timing decides them).
"""

from __future__ import annotations

import threading
import time


class Recorder:
    """A predict function recording its calls; the first call waits for `gate` to open."""

    def __init__(self, inner=None):
        self.inner = inner or (lambda rows: [sum(r) if isinstance(r, list) else r for r in rows])
        self.calls: list[list] = []
        self.threads: list[int] = []
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, instances):
        self.calls.append(list(instances))
        self.threads.append(threading.get_ident())
        if len(self.calls) == 1:
            self.entered.set()
            assert self.gate.wait(30), "test gate never opened"
        return self.inner(instances)


def queue_behind_busy_call(batcher, recorder, requests):
    """Run requests[0] (held at the gate), queue the rest behind it, open the gate; results."""
    results: dict[int, object] = {}

    def run(i, instances):
        try:
            results[i] = batcher.predict(instances)
        except Exception as exc:
            results[i] = exc

    first = threading.Thread(target=run, args=(0, requests[0]))
    first.start()
    assert recorder.entered.wait(30)
    others = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(requests) if i]
    for thread in others:
        thread.start()
    deadline = time.monotonic() + 30
    while batcher.queued() < len(others) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert batcher.queued() == len(others)
    recorder.gate.set()
    for thread in [first, *others]:
        thread.join(30)
    return results
