"""pytest-mlemu: fixtures for testing code against mlemu (docs/controls.md, "The pytest plugin").

Public API: the fixtures `mlemu_server`, `mlemu`, `mlemu_bootstrap`, `ml_v1`, `vertex_init`; the
classes `MlemuServer` and `Mlemu` (the controls client); the options `--mlemu-url`,
`--mlemu-checkout`, `--mlemu-command` (or MLEMU_URL, MLEMU_CHECKOUT, MLEMU_COMMAND).
"""

from pytest_mlemu.client import Mlemu, MlemuError
from pytest_mlemu.server import MlemuServer

__all__ = ["Mlemu", "MlemuError", "MlemuServer"]
