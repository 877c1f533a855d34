"""Request and response bodies for the request journal, when it is asked to keep them
(controls: `PUT /_mlemu/requests`): the first `limit` bytes of each, seen as the application
reads its input and as the server sends its answer, never more held than that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any


class TeeInput:
    """A WSGI input stream that remembers the first `limit` bytes read from it."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._kept = bytearray()

    def _keep(self, data: bytes) -> bytes:
        room = self._limit - len(self._kept)
        if room > 0:
            self._kept += data[:room]
        return data

    def read(self, *args: Any) -> bytes:
        return self._keep(self._stream.read(*args))

    def readinto(self, buffer: Any) -> int:  # werkzeug's LimitedStream reads this way
        count: int = getattr(self._stream, "readinto")(buffer) or 0  # noqa: B009
        room = self._limit - len(self._kept)
        if room > 0:
            self._kept += memoryview(buffer)[:min(count, room)]
        return count

    def readline(self, *args: Any) -> bytes:
        return self._keep(self._stream.readline(*args))

    def readlines(self, *args: Any) -> list[bytes]:
        return [self._keep(line) for line in self._stream.readlines(*args)]

    def __iter__(self) -> Iterator[bytes]:
        for line in self._stream:
            yield self._keep(line)

    def seen(self) -> bytes:
        return bytes(self._kept)

    def __getattr__(self, name: str) -> Any:  # gunicorn's deadline attributes and the like
        return getattr(self._stream, name)


class Captured:
    """A WSGI response iterable passing its chunks on, keeping the first `limit` bytes, and
    calling `done(kept)` once: when its last chunk was sent or when the server closes it."""

    def __init__(self, answer: Iterable[bytes], limit: int, done: Callable[[bytes], None]) -> None:
        self._answer = answer
        self._limit = limit
        self._done: Callable[[bytes], None] | None = done
        self._kept = bytearray()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._answer:
            room = self._limit - len(self._kept)
            if room > 0:
                self._kept += chunk[:room]
            yield chunk
        self._finish()

    def _finish(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(bytes(self._kept))

    def close(self) -> None:
        try:
            close = getattr(self._answer, "close", None)
            if close is not None:
                close()
        finally:
            self._finish()
