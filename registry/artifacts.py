"""Where a version's files come from: deploymentUri / packageUris to local paths.

Local paths and file:// URIs are used in place; gs:// URIs are copied into the state directory's
Cloud Storage cache first (registry/gcs.py), which only the loading path is given. Custom
predictor packages (a source distribution `.tar.gz`, a wheel, or a directory) are unpacked once
into the state directory's package cache, keyed by the file's content hash, and the import root
of each is returned; nothing is installed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.parse
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import InvalidArgument, ModelLoadError, field_violation

if TYPE_CHECKING:
    from registry.gcs import GcsCache


def is_remote(uri: str) -> bool:
    """True for URIs that must be downloaded before use (gs://)."""
    return urllib.parse.urlparse(uri).scheme == "gs"


def resolve_uri(uri: str, base_dir: str | None = None, gcs: GcsCache | None = None) -> str:
    """A local filesystem path for `uri` (relative paths are taken from `base_dir` or the cwd).

    gs:// URIs are downloaded through `gcs` (the local copy of one object, or of a prefix).
    """
    if not uri:
        raise ModelLoadError("deploymentUri is required.")
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "file":
        path = urllib.parse.unquote(parsed.path)
    elif parsed.scheme == "gs":
        if gcs is None:
            raise ModelLoadError(f"Cannot read {uri}: no Cloud Storage cache is configured here.")
        return str(gcs.fetch(uri))
    elif parsed.scheme and len(parsed.scheme) > 1:  # one letter would be a Windows drive
        raise ModelLoadError(f"Unsupported URI scheme {parsed.scheme!r} in {uri}.")
    else:
        path = uri
    if not os.path.isabs(path):
        path = os.path.join(base_dir or os.getcwd(), path)
    return os.path.normpath(path)


@dataclasses.dataclass(frozen=True)
class Sources:
    """Where versions.create may take model files and packages from.

    Loading a pickle runs its code, on the real service as here, so the boundary is the files'
    origin: local paths (and file:// URIs) only under `roots`, gs:// URIs only from `buckets`;
    None allows any. A refused URI gets one message whether or not anything exists there (the
    check touches nothing but the path's symlinks, and says nothing about them).
    """

    roots: tuple[str, ...] | None = None
    buckets: tuple[str, ...] | None = None
    #: Why a local path outside `roots` is refused (the refusal's words).
    local_rule: str = ("local model files must be under a directory this server loads models "
                       "from (MLEMU_MODEL_ROOTS)")

    @classmethod
    def for_server(cls, roots: Iterable[Path] | None, buckets: Iterable[str] | None,
                   **rules: str) -> Sources:
        return cls(None if roots is None else tuple(os.path.realpath(r) for r in roots),
                   None if buckets is None else tuple(buckets), **rules)

    def check(self, uri: str, field: str) -> None:
        """Refuse `uri` (the request's `field`) unless it comes from an allowed source."""
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme == "gs":
            if self.buckets is not None and parsed.netloc not in self.buckets:
                self._refuse(uri, field, "its bucket is not one this server may read models from "
                                         "(MLEMU_ALLOWED_BUCKETS)")
            return
        if self.roots is None:
            return
        try:
            path = os.path.realpath(resolve_uri(uri))
        except ModelLoadError:
            return  # not a local path (an unsupported scheme): loading reports it
        if not any(path == root or path.startswith(root.rstrip(os.sep) + os.sep)
                   for root in self.roots):
            self._refuse(uri, field, self.local_rule)

    @staticmethod
    def _refuse(uri: str, field: str, why: str) -> None:
        description = f"{uri!r} is not allowed: {why}."
        raise InvalidArgument(f"Field: {field} Error: {description}",
                              details=field_violation(field, description))


def resolve_model_dir(uri: str, gcs: GcsCache | None = None) -> str:
    """The local model directory for a deploymentUri (a gs:// URI naming a single object, such
    as gs://b/m/model.joblib, stands for the folder holding just that object)."""
    path = resolve_uri(uri, gcs=gcs)
    return os.path.dirname(path) if is_remote(uri) and os.path.isfile(path) else path


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:24]


def _import_root(tree: Path) -> Path:
    """Where a package's modules live: its src/ folder for src layouts, else its top folder."""
    entries = [p for p in tree.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and not (entries[0] / "__init__.py").exists():
        tree = entries[0]  # an sdist unpacks into NAME-VERSION/
    src = tree / "src"
    if src.is_dir() and ((tree / "setup.py").exists() or (tree / "pyproject.toml").exists()):
        return src
    return tree


def unpack_package(path: str, cache_dir: Path) -> str:
    """The import root of a custom predictor package at local `path`."""
    source = Path(path)
    if source.is_dir():
        return str(_import_root(source))
    if not source.is_file():
        raise ModelLoadError(f"Package {path} does not exist.")
    name = source.name
    if not (name.endswith((".tar.gz", ".tgz", ".whl", ".zip"))):
        raise ModelLoadError(
            f"Package {path} is not a source distribution (.tar.gz), a wheel (.whl) or a directory."
        )
    target = cache_dir / f"{_digest(source)}-{name}"
    if not target.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".unpack-"))
        try:
            if name.endswith(".whl") or name.endswith(".zip"):
                with zipfile.ZipFile(source) as zf:
                    zf.extractall(staging)
            else:
                with tarfile.open(source) as tf:
                    tf.extractall(staging, filter="data")
            try:
                os.rename(staging, target)  # atomic: concurrent workers race harmlessly
            except OSError:
                if not target.exists():
                    raise
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
            raise ModelLoadError(f"Could not unpack package {path}: {exc}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return str(_import_root(target))
