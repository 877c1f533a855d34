"""What the data plane records after a model answered, for every protocol alike: the version's
lastUseTime (throttled) and, for a version with a `requestLoggingConfig`, the request-response
log row (observability/request_log.py). Neither ever fails a computed prediction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from registry.resources import Version, now_rfc3339

if TYPE_CHECKING:
    from emulator import Emulator

log = logging.getLogger("mlemu")
#: lastUseTime is written at most this often per version and emulator (a write per request
#: would serialise every prediction on the store's write lock); Emulator.last_use remembers when.
LAST_USE_INTERVAL_S = 60.0


def finish(emu: Emulator, version: Version, request: Any, parameters: dict[str, Any],
           answer: Any, *, stored: bool = True) -> Any:
    """Record a served request (`request` and `answer` as the model saw and gave them) and
    return the answer. An answer the model yields item by item stays a stream: its row is
    logged once the stream is consumed, with every item. `stored`: `version` is an ml v1
    Version in the store, whose lastUseTime is kept."""
    if stored:
        touch(emu, version)
    config = version.extra.get("requestLoggingConfig")
    if not config:
        return answer
    if isinstance(answer, Iterator):
        return _logged_stream(emu, version.name, config, request, parameters, answer)
    if not hasattr(answer, "__len__"):  # an iterable read once: the row and the answer share it
        answer = list(answer)
    emu.request_log.offer(version.name, config, request, parameters, answer)
    return answer


def _logged_stream(emu: Emulator, version_name: str, config: Any, request: Any,
                   parameters: dict[str, Any], items: Iterator[Any]) -> Iterator[Any]:
    seen: list[Any] = []
    for item in items:
        seen.append(item)
        yield item
    emu.request_log.offer(version_name, config, request, parameters, seen)


def touch(emu: Emulator, version: Version) -> None:
    """Stamp the version's lastUseTime, at most once per LAST_USE_INTERVAL_S."""
    now = time.monotonic()
    last_use = emu.last_use
    if now - last_use.get(version.name, -LAST_USE_INTERVAL_S) < LAST_USE_INTERVAL_S:
        return
    last_use[version.name] = now

    def stamp(current: Version) -> bool:
        current.last_use_time = now_rfc3339()
        return True

    try:
        # Quiet: no serving decision reads lastUseTime, so the stamp must not change the store's
        # change token, which would drop every thread's cached serving versions and make the
        # next prune read every held version. With a thousand versions served, each stamped
        # once a minute by each worker, the token otherwise changed every few milliseconds.
        emu.store.update_version(version, stamp, quiet=True)
    except Exception as exc:  # noqa: BLE001 - bookkeeping never fails a computed prediction
        log.warning("could not record lastUseTime of %s: %s", version.name, exc)
