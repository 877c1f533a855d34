"""deploy/request_target.py: gunicorn's request-target split keeps room for many distinct paths,
with the same results as CPython's own urlsplit. Each case runs in a fresh interpreter, so the
widened cache never leaks into the test process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = r'''
import sys, urllib.parse
sys.path.insert(0, sys.argv[1])
from gunicorn.util import split_request_uri
from deploy import request_target

targets = ["/v1/projects/p/models/m%03d:predict" % i for i in range(300)] + [
    "/v2/models/m/infer?x=1#f", "//double/slash", "http://h:1/p?q", "*", "/%7Euser/a;b?c=d"]
plain = urllib.parse.urlsplit
before = [split_request_uri(t) for t in targets]
assert plain.cache_info().maxsize == 128
request_target.install()
widened = urllib.parse.urlsplit
assert widened.cache_info().maxsize == request_target.MAX_TARGETS
for _ in range(2):  # the second pass is served from the cache: still the same results
    assert [split_request_uri(t) for t in targets] == before
assert widened.cache_info().hits >= 300, widened.cache_info()
assert urllib.parse.urlsplit("/a", "", True) == plain("/a", "", True)
request_target.install()  # a second install keeps the widened cache
assert urllib.parse.urlsplit is widened

# gunicorn's own request parser goes through it: 300 distinct paths, twice, the second time
# answered from the cache (with CPython's 128 every one would be a miss).
from gunicorn.config import Config
from gunicorn.http.parser import RequestParser

lines = [b"POST /v1/projects/p/models/n%03d:predict HTTP/1.1\r\nHost: a\r\n"
         b"Content-Length: 0\r\n\r\n" % i for i in range(300)]
parser = RequestParser(Config(), iter(lines * 2), ("127.0.0.1", 1))
hits = widened.cache_info().hits
paths = [next(parser).path for _ in range(600)]
assert paths[:300] == paths[300:] == ["/v1/projects/p/models/n%03d:predict" % i for i in range(300)]
assert widened.cache_info().hits - hits == 300, widened.cache_info()
print("ok")
'''


def test_install_widens_the_cache_and_keeps_the_results() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK, str(ROOT)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
