"""`python -m grpcserve [--reuse-port]`: one gRPC server process (what `serve` starts beside
gunicorn)."""

import sys

from grpcserve.server import main

sys.exit(main())
