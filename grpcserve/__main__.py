"""`python -m grpcserve [--reuse-port]`: one gRPC server process (what `serve` starts beside
gunicorn).

SIGTERM/SIGINT are caught before anything is imported: `serve` may stop (and forwards the
signal) while this process still imports the server, and a process killed by the default
disposition would end with -15, which `serve` reports as its own failure. An early signal only
flags the stop; `main` then exits cleanly, or stops right after it starts listening.
"""

import signal
import sys
import threading

stopping = threading.Event()


def _stop_early(signum: int, frame: object) -> None:
    stopping.set()


signal.signal(signal.SIGTERM, _stop_early)
signal.signal(signal.SIGINT, _stop_early)

from grpcserve.server import main  # noqa: E402 - after the handlers, on purpose

sys.exit(main(stopping=stopping))
