"""A Vertex AI custom container's HTTP server for tests: a stdlib script that follows Vertex AI's
custom-container contract (AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE, AIP_STORAGE_URI)
and answers from what it was given, so tests see every part of the contract arrive.

predict: {"instances": [[numbers]], "parameters": {"scale": s}} -> {"predictions": [{"sum":
(sum(row) + OFFSET) * s * FACTOR, "pid": its pid, "env": the AIP_* variables}]}, OFFSET read
from AIP_STORAGE_URI/offset.txt (0 without it), FACTOR from containerSpec.env. A text/csv body
(rawPredict) is answered in text/plain: the sum of its numbers. Control keys, in the body or its
first instance: `{"status": N}` answers N, `{"sleep": s}` sleeps s seconds first, `{"big": n}`
answers a prediction of n bytes, `{"plain": x}` an object without predictions. HEALTH_STATUS
sets the health route's status; HEALTH_MARK names a file created once a health check was
answered.
"""

from __future__ import annotations

from pathlib import Path

SERVER = r'''
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ["AIP_HTTP_PORT"])
HEALTH, PREDICT = os.environ["AIP_HEALTH_ROUTE"], os.environ["AIP_PREDICT_ROUTE"]
STORAGE = os.environ.get("AIP_STORAGE_URI", "")
OFFSET = float(open(os.path.join(STORAGE, "offset.txt")).read()) if STORAGE else 0.0
FACTOR = float(os.environ.get("FACTOR", "1"))
print("container up on", PORT, "args", sys.argv[1:], file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    def _send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path != HEALTH:
            return self._send(404, {"path": self.path})
        status = int(os.environ.get("HEALTH_STATUS", "200"))
        self._send(status, {"status": status})
        if os.environ.get("HEALTH_MARK"):  # tells a test a health check was answered
            open(os.environ["HEALTH_MARK"], "a").close()

    def do_POST(self):
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != PREDICT:
            return self._send(404, {"error": "no route " + self.path})
        if self.headers.get("Content-Type") == "text/csv":
            total = sum(float(x) for x in data.decode().split(","))
            return self._send(200, str(total).encode(), "text/plain")
        body = json.loads(data)
        first = (body.get("instances") or [None])[0]
        ctl = first if isinstance(first, dict) else body  # control keys: the body or an instance
        if "sleep" in ctl:
            time.sleep(ctl["sleep"])
        if "big" in ctl:
            return self._send(200, {"predictions": ["x" * ctl["big"]]})
        if "plain" in ctl:
            return self._send(200, {"answer": ctl["plain"]})
        if "status" in ctl:
            return self._send(ctl["status"], {"error": "asked for " + str(ctl["status"])})
        scale = (body.get("parameters") or {}).get("scale", 1)
        env = {k: v for k, v in os.environ.items() if k.startswith("AIP_")}
        self._send(200, {"predictions": [
            {"sum": (sum(row) + OFFSET) * scale * FACTOR, "pid": os.getpid(), "env": env,
             "argv": sys.argv[1:]} for row in body["instances"]]})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
'''


def write_server(directory: Path) -> Path:
    """The server script in `directory` (created); run it as `python PATH`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "server.py"
    path.write_text(SERVER)
    return path


def write_artifacts(directory: Path, offset: float) -> Path:
    """A model directory the server reads through AIP_STORAGE_URI."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "offset.txt").write_text(str(offset))
    return directory
