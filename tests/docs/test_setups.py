"""The documentation's examples that need more than `make serve`'s server (```LANG setup=NAME):
each NAME is a setup below that builds what the page has its reader make first, then runs the
block as written and checks what its comments say it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, start_server, stop_server
from tests.docs import examples
from tests.docs.examples import Block
from tests.kit import iamkit

pytestmark = pytest.mark.slow


def run_python(block: Block, url: str, cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 120) -> None:
    code = block.text.replace("http://127.0.0.1:8080", url)
    run = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout, env=None if env is None else {**os.environ, **env})
    assert run.returncode == 0, (block.where, run.stderr)
    printed = [examples.python_value(line) for line in run.stdout.splitlines()]
    expected = [examples.python_value(line) for line in examples.python_expectations(block.text)]
    assert examples.same_value(printed, expected), (block.where, run.stdout)


def iam(block: Block, tmp_path: Path) -> None:
    """docs/iam.md: the page's own IAM configuration file, with the key files and certificate it
    names made here, on a server enforcing IAM; the example then signs in with `deployer.json`."""
    config = next(b for b in examples.blocks(block.page)
                  if b.lang == "yaml" and "serviceAccounts" in b.text)
    accounts = yaml.safe_load(config.text)["serviceAccounts"]
    (tmp_path / "keys").mkdir()
    deployer = iamkit.service_account_info("deployer@my-project.iam.gserviceaccount.com")
    iamkit.write_key_file(tmp_path / accounts[0]["keyFile"], deployer)
    iamkit.write_key_file(tmp_path / "deployer.json", deployer)  # where the example reads it
    (tmp_path / accounts[1]["certFile"]).write_text(iamkit.self_signed_cert(iamkit.new_key()))
    (tmp_path / "iam.yaml").write_text(config.text)
    server = start_server(tmp_path / "state", env={"MLEMU_IAM_MODE": "enforce",
                                                   "MLEMU_IAM_CONFIG": str(tmp_path / "iam.yaml")})
    try:
        run_python(block, server.url, tmp_path)
    finally:
        stop_server(server.proc)


def vertex(block: Block, tmp_path: Path) -> None:
    """docs/vertex.md: the demo's models (as `make serve` trains them), a Cloud Storage emulator
    with the `staging` bucket, and a server reading it; the example runs from the clone with
    STORAGE_EMULATOR_HOST set, as the page says."""
    from tests.kit.services import StorageEmulator

    subprocess.run([sys.executable, str(ROOT / "demo" / "make_models.py")], check=True)
    gcs = StorageEmulator(tmp_path)
    try:
        gcs.client().create_bucket("staging")  # type: ignore[attr-defined]
        env = {"STORAGE_EMULATOR_HOST": gcs.host}
        server = start_server(tmp_path / "state", env=env)
        try:
            run_python(block, server.url, ROOT, env, timeout=300)
        finally:
            stop_server(server.proc)
    finally:
        gcs.stop()


SETUPS: dict[str, Callable[[Block, Path], None]] = {"iam": iam, "vertex": vertex}
BLOCKS = examples.example_blocks("setup")


def test_every_setup_named_exists() -> None:
    assert BLOCKS, "the pages have examples that need a setup"
    assert [b.where for b in BLOCKS if b.setup not in SETUPS] == []


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_example_with_its_setup(block: Block, tmp_path: Path) -> None:
    assert block.setup is not None
    SETUPS[block.setup](block, tmp_path)
