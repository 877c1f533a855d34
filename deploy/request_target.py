"""A wider cache for `urllib.parse.urlsplit`, which gunicorn runs on every request's target.

gunicorn splits each request line's target with urllib.parse.urlsplit (gunicorn/util.py
`split_request_uri`, called from gunicorn/http/message.py `parse_request_line`). CPython keeps the
results for the last 128 distinct targets (Lib/urllib/parse.py, `@functools.lru_cache(typed=True)`
on urlsplit). Clients that rotate over more paths than that, such as traffic spread over 200
models' `:predict` URLs, miss it on every request, and each miss parses afresh: ~1.2 us in a
microbenchmark, and 0-11 us less CPU per request with a wider cache in four side-by-side runs of
200 models' spread traffic (bench/NOTES.md, sixth session; the runs' noise is ~5 us, their
median ~3 us, ~1 % of the spread's CPU per request). Small, but paid on every request once a server's
clients use more than 128 paths. `install()` puts in the same function with room for
MAX_TARGETS results: the results are immutable named tuples, so sharing them changes nothing.
"""

from __future__ import annotations

import functools
import urllib.parse

#: Targets remembered: four times the default bound on loaded versions (MLEMU_MAX_LOADED_VERSIONS),
#: ~0.4 MB at most.
MAX_TARGETS = 1024


def install(size: int = MAX_TARGETS) -> None:
    """Widen this process's urlsplit cache to `size` results (a worker calls this once)."""
    current = urllib.parse.urlsplit
    cache_info = getattr(current, "cache_info", None)
    original = getattr(current, "__wrapped__", None)
    if cache_info is None or original is None:
        return  # another Python's urlsplit, without the cache this widens
    maxsize = cache_info().maxsize
    if maxsize is None or maxsize >= size:
        return
    urllib.parse.urlsplit = functools.lru_cache(maxsize=size, typed=True)(original)  # type: ignore[assignment]
