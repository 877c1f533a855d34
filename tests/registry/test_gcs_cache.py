"""registry/gcs.py against a real Cloud Storage emulator (gcp-storage-emulator, started by the
tests): copies keyed by URI and object generation, downloads shared safely by concurrent
callers, and clear errors for missing buckets and objects."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from core.errors import ModelLoadError
from registry import artifacts
from registry.gcs import GcsCache
from tests.conftest import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bucket(gcs_emulator: Any) -> Any:
    bucket = gcs_emulator.client().create_bucket("unit-cache")
    for name, data in {"m/v1/model.joblib": b"one", "m/v1/assets/vocab.txt": b"a\nb\n",
                       "m/v1/": b"", "m/v10/other": b"not under m/v1/", "pkg/p.tar.gz": b"tgz"}.items():
        bucket.blob(name).upload_from_string(data)
    return bucket


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_prefix_and_single_object_copies_are_reused_until_a_generation_changes(
        gcs_emulator: Any, bucket: Any, tmp_path: Path) -> None:
    cache = GcsCache(tmp_path / "gcs", gcs_emulator.host)
    first = cache.fetch("gs://unit-cache/m/v1")
    # Every object under the prefix (not m/v10/..., not the "m/v1/" folder placeholder).
    assert _files(first) == {"model.joblib": b"one", "assets/vocab.txt": b"a\nb\n"}
    assert cache.fetch("gs://unit-cache/m/v1/") != first  # another URI, another copy
    mtime = (first / "model.joblib").stat().st_mtime_ns
    assert cache.fetch("gs://unit-cache/m/v1") == first  # same generations: no download
    assert (first / "model.joblib").stat().st_mtime_ns == mtime

    bucket.blob("m/v1/model.joblib").upload_from_string(b"two")  # a new generation
    second = cache.fetch("gs://unit-cache/m/v1")
    assert second != first and (second / "model.joblib").read_bytes() == b"two"
    assert (second / "assets/vocab.txt").read_bytes() == b"a\nb\n"

    single = cache.fetch("gs://unit-cache/pkg/p.tar.gz")
    assert single.name == "p.tar.gz" and single.read_bytes() == b"tgz"
    # A deploymentUri naming one object stands for the folder holding just that object.
    assert artifacts.resolve_model_dir("gs://unit-cache/pkg/p.tar.gz", cache) == str(single.parent)
    assert artifacts.resolve_uri("gs://unit-cache/m/v1", gcs=cache) == str(second)
    assert not list((tmp_path / "gcs").glob(".download-*"))


def test_concurrent_fetches_share_one_complete_copy(gcs_emulator: Any, bucket: Any,
                                                    tmp_path: Path) -> None:
    for i in range(6):
        bucket.blob(f"many/f{i}.bin").upload_from_string(bytes([i]) * 50_000)
    caches = [GcsCache(tmp_path / "gcs", gcs_emulator.host) for _ in range(4)]  # like 4 workers
    results: list[Path] = []
    start = threading.Barrier(len(caches))

    def fetch(cache: GcsCache) -> None:
        start.wait()
        results.append(cache.fetch("gs://unit-cache/many"))

    threads = [threading.Thread(target=fetch, args=(c,)) for c in caches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4 and len(set(results)) == 1
    assert _files(results[0]) == {f"f{i}.bin": bytes([i]) * 50_000 for i in range(6)}
    assert [p.name for p in (tmp_path / "gcs").iterdir()] == [results[0].name]  # no leftovers


def test_an_object_deleted_during_the_copy_leaves_no_partial_copy(gcs_emulator: Any, bucket: Any,
                                                                   tmp_path: Path) -> None:
    for name in ("racy/a.bin", "racy/b.bin"):
        bucket.blob(name).upload_from_string(b"data")

    class Racing(GcsCache):
        def _list(self, uri: str, bucket_name: str, path: str) -> Any:
            listed = super()._list(uri, bucket_name, path)
            bucket.blob("racy/b.bin").delete()  # gone between the listing and its download
            return listed

    with pytest.raises(ModelLoadError) as info:
        Racing(tmp_path / "gcs", gcs_emulator.host).fetch("gs://unit-cache/racy")
    assert info.value.message == ("Cannot read gs://unit-cache/racy: gs://unit-cache/racy/b.bin was "
                                  "deleted or replaced while it was being copied.")
    assert list((tmp_path / "gcs").iterdir()) == []  # neither a copy nor a staging directory


def test_missing_bucket_object_and_unreachable_storage_are_clear_errors(
        gcs_emulator: Any, bucket: Any, tmp_path: Path) -> None:
    cache = GcsCache(tmp_path / "gcs", gcs_emulator.host)
    with pytest.raises(ModelLoadError) as info:
        cache.fetch("gs://no-such-bucket/m/v1")
    assert info.value.message == ("Cannot read gs://no-such-bucket/m/v1: bucket gs://no-such-bucket "
                                  "does not exist.")
    with pytest.raises(ModelLoadError) as info:
        cache.fetch("gs://unit-cache/m/v2")
    assert info.value.message == ("Cannot read gs://unit-cache/m/v2: no object or folder m/v2 exists "
                                  "in bucket gs://unit-cache.")
    with pytest.raises(ModelLoadError, match="is not a gs://BUCKET/PATH URI"):
        cache.fetch("gs:///nobucket")
    # host:port (no scheme, as gcloud prints it) with nothing listening; retried for 2 s only.
    down = GcsCache(tmp_path / "gcs", f"127.0.0.1:{free_port()}", call_timeout=2.0)
    with pytest.raises(ModelLoadError) as info:
        down.fetch("gs://unit-cache/m/v1")
    assert info.value.message.startswith("Cannot read gs://unit-cache/m/v1: ")
    assert "Connection" in info.value.message


def test_cloud_storage_and_postgres_libraries_load_only_when_used(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from boot import build_emulator\n"
        "from core.settings import Settings\n"
        f"emu = build_emulator(Settings(state_dir=Path({str(tmp_path)!r})), warm=False)\n"
        "print(sorted(m for m in ('google.cloud.storage', 'psycopg') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
