"""The protobuf and gRPC modules generated from protos/*.proto, for the rest of the code to import.

They are generated at build time only (`make protos`, which `make venv` and `make test` run, and
the image build: `python -m protocols.protos`, see protocols/protos.py) into the gitignored
protocols/_generated, never on import: a server must not write into its own source tree, and a
half-written build seen by a process starting beside it would be worse than none. When the package
is missing, importing this module fails with one message naming the command that builds it.
"""

from __future__ import annotations

try:
    from protocols._generated import (
        grpc_predict_v2_pb2,
        grpc_predict_v2_pb2_grpc,
        grps_pb2,
        grps_pb2_grpc,
    )
except ModuleNotFoundError as exc:
    if not (exc.name or "").startswith("protocols._generated"):
        raise
    raise ModuleNotFoundError(
        "The gRPC modules generated from protos/*.proto are missing (protocols/_generated): run "
        "`make protos` (or `python -m protocols.protos`) to generate them.",
        name=exc.name,
    ) from None

__all__ = ["grpc_predict_v2_pb2", "grpc_predict_v2_pb2_grpc", "grps_pb2", "grps_pb2_grpc"]
