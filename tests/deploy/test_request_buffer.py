"""deploy/request_buffer.py: where a request ends, fed a byte at a time or all at once."""

import pytest

from deploy.request_buffer import RequestBuffer

HEAD = b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\n"


def buffer(max_body: int = 1024) -> RequestBuffer:
    return RequestBuffer(0.0, 10.0, 60.0, max_head=4096, max_body=max_body)


def complete_at(data: bytes, max_body: int = 1024) -> int | None:
    """The number of bytes after which the buffer says complete, fed one byte at a time."""
    buf = buffer(max_body)
    for index in range(len(data)):
        if buf.feed(data[index:index + 1]):
            return index + 1
    return None


@pytest.mark.parametrize("request_bytes", [
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    HEAD + b"Content-Length: 5\r\n\r\nhello",
    HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\n\r\n",
    HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n",
    HEAD + b"content-length:   2  \r\n\r\nok",
])
def test_complete_exactly_at_the_end_of_the_request(request_bytes):
    assert complete_at(request_bytes) == len(request_bytes)
    buf = buffer()
    assert buf.feed(request_bytes + b"GET / HTTP/1.1\r\n")  # pipelined bytes are kept, not lost
    assert buf.take().endswith(b"GET / HTTP/1.1\r\n")


@pytest.mark.parametrize("partial", [
    HEAD + b"Content-Ty",
    HEAD + b"Content-Length: 10\r\n\r\nhello",
    HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel",
    HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
])
def test_incomplete_requests_wait(partial):
    buf = buffer()
    assert not buf.feed(partial)
    assert buf.deadline == (10.0 if b"\r\n\r\n" not in partial else 60.0)


@pytest.mark.parametrize("handed_over", [
    HEAD + b"Expect: 100-continue\r\nContent-Length: 10\r\n\r\n",  # the client waits for 100
    HEAD + b"Content-Length: zz\r\n\r\n",  # gunicorn answers the bad length
    HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",  # ... and the bad chunk size
    HEAD + b"Content-Length: 5000\r\n\r\n",  # larger than the buffer: read by the thread
    HEAD + b"X: " + b"v" * 5000,  # an over-long head: gunicorn answers 431
    HEAD + b"Content-Length: 5\r\nContent-Length: 100\r\n\r\nhello",  # two lengths
    HEAD + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\n",  # even equal ones
    HEAD + b"Content-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
])
def test_what_gunicorn_must_frame_or_refuse_is_handed_over(handed_over):
    assert buffer().feed(handed_over)
    assert buffer().refusal is None


def test_a_chunk_larger_than_any_route_accepts_is_refused_at_once():
    buf = RequestBuffer(0.0, 10.0, 60.0, max_head=4096, max_body=1024, max_declared=1 << 20)
    assert buf.feed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 20 + b"\r\nab")
    assert buf.refusal == ("Request payload size exceeds the limit: a chunk of "
                           f"{int('f' * 20, 16)} bytes, the server accepts at most 1048576.")
    within = RequestBuffer(0.0, 10.0, 60.0, max_head=4096, max_body=1024, max_declared=1 << 20)
    assert within.feed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n100000\r\nab")
    assert within.refusal is None  # a large chunk the limit allows: read by the thread
