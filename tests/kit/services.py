"""Real backing services the tests start themselves: a PostgreSQL server (the Debian package's
binaries, a temporary data directory, a free port), a Cloud Storage emulator
(gcp-storage-emulator from PyPI, in memory, on a free port) and a Prometheus server (the Debian
package `prometheus`). All listen on 127.0.0.1 only.

A missing PostgreSQL or Prometheus installation fails the test (CI installs both in .ci/run):
it is never a skip.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import free_port


def _wait_port(port: int, proc: subprocess.Popen[bytes] | None, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout}s")


def _terminate(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def postgres_bin(name: str) -> str:
    """A PostgreSQL server binary: the newest /usr/lib/postgresql/*/bin (Debian), else PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    path = found[-1] if found else shutil.which(name)
    if not path:
        pytest.fail(f"PostgreSQL's {name} was not found: install the Debian package postgresql "
                    "(apt-get install -y postgresql, as .ci/run does).")
    return path


class PostgresServer:
    """`initdb` + `pg_ctl start` in a temporary directory; trust authentication on 127.0.0.1.

    PostgreSQL refuses to run as root, so as root it runs as the `postgres` system user the
    Debian package creates.
    """

    def __init__(self) -> None:
        self.port = free_port()
        # Not under pytest's tmp_path: its parents are private to root, and postgres must read it.
        self.dir = Path(tempfile.mkdtemp(prefix="mlemu-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._run(postgres_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync", "--no-instructions")
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir}"
                   " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                   " -c max_connections=200")
        self._run(postgres_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", "60", "-o", options, "start")
        _wait_port(self.port, None, "postgres")

    def _run(self, *cmd: str) -> None:
        result = subprocess.run([*self._as_user, *cmd], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}{log}")

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}".encode())
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(postgres_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class StorageEmulator:
    """gcp-storage-emulator in memory; `client()` is a google-cloud-storage client for it."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.host = f"http://127.0.0.1:{self.port}"
        self._log = open(log_dir / "gcs-emulator.log", "wb")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
             "--port", str(self.port), "--in-memory"],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_port(self.port, self.proc, "gcp-storage-emulator")

    def client(self) -> object:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project="test", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.host})

    def upload_dir(self, bucket: object, local: Path, prefix: str) -> None:
        """Every file under `local` as objects under `prefix/`."""
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            rel = path.relative_to(local).as_posix()
            bucket.blob(f"{prefix}/{rel}").upload_from_filename(str(path))  # type: ignore[attr-defined]

    def stop(self) -> None:
        _terminate(self.proc)
        self._log.close()


class PrometheusServer:
    """The Debian package's `prometheus` scraping `targets` (host:port) every second."""

    def __init__(self, directory: Path, targets: list[str]) -> None:
        binary = shutil.which("prometheus")
        if not binary:
            pytest.fail("Prometheus was not found: install the Debian package prometheus "
                        "(apt-get install -y prometheus, as .ci/run does).")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: mlemu\n    static_configs:\n"
            f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
        self._log = open(directory / "prometheus.log", "wb")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_port(self.port, self.proc, "prometheus")
        self._wait_ready()

    def _wait_ready(self, timeout: float = 180) -> None:
        """Prometheus listens before its storage is open; /-/ready answers 200 once it is."""
        import requests

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"prometheus was not ready within {timeout}s")

    def query(self, promql: str) -> list[dict[str, object]]:
        """The instant vector of a PromQL query, through Prometheus's HTTP API."""
        import requests

        answer = requests.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def stop(self) -> None:
        _terminate(self.proc)
        self._log.close()
