"""setuptools' one build step beyond pyproject.toml: protocols/_generated.

The gRPC and protobuf modules are compiled from protos/*.proto (protocols/protos.py, grpcio-tools
from the build requirements) into the build directory, so `pip install .`, `pip wheel .` and a
Beam `--setup_file` build work from a clean clone, without `make protos` first. An editable
install (`pip install -e .`) compiles them into the checkout's protocols/_generated, as
`make protos` does: the installed package is the checkout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _protos() -> ModuleType:
    """protocols/protos.py, loaded by path: the build must not import the package (its
    __init__ may need the runtime requirements the build environment lacks)."""
    spec = importlib.util.spec_from_file_location("_mlemu_protos", HERE / "protocols" / "protos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithProtos(build_py):
    """build_py, then the generated package into the build (or the checkout when editable)."""

    def run(self) -> None:
        super().run()
        protos = _protos()
        if self.editable_mode:
            protos.build()
        else:
            protos.build(Path(self.build_lib) / "protocols" / "_generated")


setup(cmdclass={"build_py": BuildPyWithProtos})
