"""One HTTP/1.1 request's bytes, collected before a worker thread is given the connection.

deploy/worker.py reads a request in its main loop (non-blocking, no thread) until this buffer says
the request is complete: the head (request line and headers) and, for a small body, the body
(`Content-Length` bytes, or chunked framing up to its last chunk and trailers). A client that
sends part of a request and goes silent then holds a socket in the poller, never a thread, and is
closed at its deadline: `header_deadline` until the head is complete, `request_deadline` (head and
body) after that. Both run from the request's first byte (a new connection's accept), not from the
last byte received, so a client that trickles one byte at a time gets no more time than one that
stops.

This only finds where a request ends; gunicorn's own parser still parses it. Anything this scanner
cannot frame (an over-long head, a bad chunk size or length, more than one Content-Length, both
Content-Length and chunked, `Expect: 100-continue`, a body larger than `max_body`) counts as
complete: the thread then parses it with gunicorn's code, which answers the error at once (it
refuses those framings from the head alone, gunicorn/http/message.py `set_body_reader`), and
reads the rest of a large body under `request_deadline` (worker.DeadlineSocket). A chunk that
declares more bytes than any route accepts (`max_declared`) is refused here (`refusal`): the
body could only be refused, and gunicorn would first wait for its bytes until the deadline.
"""

from __future__ import annotations

_HEAD_END = b"\r\n\r\n"
#: Longest chunk-size line (with extensions) the scanner waits for; gunicorn refuses far shorter.
_MAX_CHUNK_LINE = 4096


class RequestBuffer:
    """Bytes received for one request, and whether they make a complete request yet."""

    def __init__(self, started: float, header_timeout: float, request_timeout: float,
                 max_head: int, max_body: int, max_declared: int | None = None) -> None:
        self.started = started
        self.header_deadline = started + header_timeout
        self.request_deadline = started + max(request_timeout, header_timeout)
        self.max_head = max_head
        self.max_body = max_body
        self.max_declared = max_declared
        self.data = bytearray()
        self.complete = False
        #: Why the request is refused without gunicorn (the worker answers 400 with it).
        self.refusal: str | None = None
        self._body_start: int | None = None  # set once the head is complete
        self._length: int | None = None  # Content-Length body: its length
        self._chunk_pos: int | None = None  # chunked body: where the next chunk-size line starts

    @property
    def deadline(self) -> float:
        return self.header_deadline if self._body_start is None else self.request_deadline

    @property
    def head_complete(self) -> bool:
        return self._body_start is not None

    def feed(self, chunk: bytes) -> bool:
        """Add received bytes; True once the request is complete (or is the thread's to frame)."""
        if self.complete:
            return True
        start = max(0, len(self.data) - 3)
        self.data += chunk
        if self._body_start is None:
            end = self.data.find(_HEAD_END, start)
            if end < 0:
                self.complete = len(self.data) > self.max_head  # gunicorn answers 431/414
                return self.complete
            self._frame(bytes(self.data[:end]), end + len(_HEAD_END))
        if not self.complete:
            self.complete = self._body_complete()
        return self.complete

    def take(self) -> bytes:
        data, self.data = bytes(self.data), bytearray()
        return data

    def _frame(self, head: bytes, body_start: int) -> None:
        """Read the framing headers of a complete head."""
        self._body_start = body_start
        length = chunked = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"content-length":
                if length is not None:  # gunicorn refuses a second one, whatever its value
                    self.complete = True
                    return
                length = value.strip()
            elif name == b"expect" and value.strip().lower() == b"100-continue":
                self.complete = True  # the client waits for gunicorn's "100 Continue"
                return
        if chunked and length is not None:
            self.complete = True  # gunicorn refuses both framings in one request
        elif chunked:
            self._chunk_pos = body_start
        elif length is not None:
            if not length.isdigit() or int(length) > self.max_body:
                self.complete = True  # gunicorn refuses a bad length; a large body is read later
                return
            self._length = int(length)
        else:
            self.complete = True  # no body

    def _body_complete(self) -> bool:
        assert self._body_start is not None
        if self._length is not None:
            return len(self.data) - self._body_start >= self._length
        pos = self._chunk_pos
        assert pos is not None
        while True:
            if pos - self._body_start > self.max_body:
                return True
            eol = self.data.find(b"\r\n", pos)
            if eol < 0:
                self._chunk_pos = pos
                return len(self.data) - pos > _MAX_CHUNK_LINE
            size_text = bytes(self.data[pos:eol]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                return True  # gunicorn answers the bad chunk size
            if self.max_declared is not None and size > self.max_declared:
                self.refusal = (f"Request payload size exceeds the limit: a chunk of {size} "
                                f"bytes, the server accepts at most {self.max_declared}.")
                return True
            if size == 0:  # last chunk, then optional trailers and the final empty line
                self._chunk_pos = pos
                return self.data.find(_HEAD_END, eol) >= 0
            end = eol + 2 + size + 2
            if len(self.data) < end:
                self._chunk_pos = pos  # this chunk is rescanned when more arrives
                return end - self._body_start > self.max_body
            pos = end
