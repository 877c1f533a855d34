"""gs:// artifacts: Cloud Storage objects copied into a local cache before a version loads them.

A URI names either one object (`gs://b/pkg/scorer-0.1.tar.gz`) or every object under a prefix
(`gs://b/models/census`, the deploymentUri of a model directory). Each copy lives in the cache
under a name made of the URI and the generation of every object in it, so a copy is reused until
an object changes and then downloaded again. Copies are built in a temporary directory and
renamed into place, so gunicorn workers (and instances sharing a disk) that download the same
thing at once never see a half-written copy; whoever renames second drops its own. The objects
of a prefix download concurrently (google.cloud.storage.transfer_manager.download_many).

google-cloud-storage is imported only here and only when a gs:// URI is resolved. When an
emulator host is configured (STORAGE_EMULATOR_HOST, read by settings.py) the client talks to it
with anonymous credentials, as google-cloud-storage itself does for that variable; otherwise it
uses Application Default Credentials, or anonymous access (public buckets) when there are none.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from core.errors import ModelLoadError

#: The ml v1 Version reference: "The total number of files under this directory must not
#: exceed 1000."
MAX_FILES = 1000
#: Seconds one storage call may take, retries included (the library's default is 120 s).
CALL_TIMEOUT_S = 30.0
READ_ONLY_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
#: Objects of one URI downloaded at once (a model directory is a few to a few hundred files).
DOWNLOAD_THREADS = 8


def split(uri: str) -> tuple[str, str]:
    """(bucket, object name or prefix) of a gs:// URI."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "gs" or not parsed.netloc:
        raise ModelLoadError(f"{uri} is not a gs://BUCKET/PATH URI.")
    return parsed.netloc, urllib.parse.unquote(parsed.path).lstrip("/")


def _safe_relative(name: str, uri: str) -> str:
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ModelLoadError(f"Cannot copy {uri}: object name {name!r} is not a safe relative path.")
    return name


class GcsCache:
    """Local copies of gs:// objects under `root`, shared by every process using that directory."""

    def __init__(self, root: Path, emulator_host: str | None = None,
                 call_timeout: float = CALL_TIMEOUT_S) -> None:
        self.root = Path(root)
        self.emulator_host = emulator_host
        self.call_timeout = call_timeout
        self._client: Any = None
        self._client_pid = 0
        self._guard = threading.Lock()

    def fetch(self, uri: str) -> Path:
        """The local copy of `uri`: the file for a single object, the directory for a prefix."""
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        bucket, path = split(uri)
        try:
            single, objects = self._list(uri, bucket, path)
            return self._materialise(uri, single, objects)
        except gexc.NotFound:
            raise ModelLoadError(f"Cannot read {uri}: bucket gs://{bucket} does not exist.") from None
        except gexc.Forbidden as exc:
            raise ModelLoadError(f"Cannot read {uri}: permission denied ({exc.message}).") from None
        except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, OSError) as exc:
            # OSError covers what `requests` raises when the storage endpoint is unreachable.
            raise ModelLoadError(f"Cannot read {uri}: {type(exc).__name__}: {exc}") from None

    # --- Cloud Storage -------------------------------------------------------------------------

    def client(self) -> Any:
        """One client per process (its HTTP session does not survive a fork)."""
        with self._guard:
            if self._client is None or self._client_pid != os.getpid():
                self._client, self._client_pid = self._new_client(), os.getpid()
            return self._client

    def _new_client(self) -> Any:
        from google.auth.credentials import AnonymousCredentials

        # google-cloud-core 2.8 ships google/cloud/version.py, which hides the namespace
        # package from mypy.
        from google.cloud import storage  # type: ignore[attr-defined]

        if self.emulator_host:
            endpoint = self.emulator_host
            if "://" not in endpoint:  # gcloud's emulators print host:port
                endpoint = f"http://{endpoint}"
            return storage.Client(project="mlemu", credentials=AnonymousCredentials(),
                                  client_options={"api_endpoint": endpoint})
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            credentials, project = google.auth.default(scopes=[READ_ONLY_SCOPE])
        except DefaultCredentialsError:
            return storage.Client.create_anonymous_client()  # public buckets still work
        return storage.Client(project=project, credentials=credentials)

    def _retry(self) -> Any:
        from google.cloud.storage.retry import DEFAULT_RETRY

        return DEFAULT_RETRY.with_timeout(self.call_timeout)

    def _list(self, uri: str, bucket: str, path: str) -> tuple[bool, list[tuple[str, Any]]]:
        """(single object?, [(relative path, blob)]) for what `uri` names."""
        client = self.client()
        if path and not path.endswith("/"):
            blob = client.bucket(bucket).get_blob(path, timeout=self.call_timeout, retry=self._retry())
            if blob is not None:
                return True, [(posixpath.basename(path), blob)]
        prefix = f"{path.rstrip('/')}/" if path else ""
        objects: list[tuple[str, Any]] = []
        # Listing a bucket that does not exist raises NotFound (fetch names the bucket).
        for blob in client.list_blobs(bucket, prefix=prefix, timeout=self.call_timeout,
                                      retry=self._retry()):
            relative = blob.name[len(prefix):]
            if not relative or relative.endswith("/"):
                continue  # a "folder" placeholder object made by the console or gsutil
            objects.append((_safe_relative(relative, uri), blob))
            if len(objects) > MAX_FILES:
                raise ModelLoadError(
                    f"Cannot read {uri}: more than {MAX_FILES} files under it (the service's limit).")
        if not objects:
            raise ModelLoadError(
                f"Cannot read {uri}: no object or folder {path or '/'} exists in bucket gs://{bucket}.")
        return False, objects

    # --- the local cache -----------------------------------------------------------------------

    def _materialise(self, uri: str, single: bool, objects: list[tuple[str, Any]]) -> Path:
        fingerprint = "\n".join(f"{rel} {blob.generation}" for rel, blob in sorted(
            objects, key=lambda o: o[0]))
        key = hashlib.sha256(uri.encode()).hexdigest()[:16]
        target = self.root / f"{key}-{hashlib.sha256(fingerprint.encode()).hexdigest()[:16]}"
        if not target.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=self.root, prefix=".download-"))
            try:
                self._download(uri, objects, staging)
                try:
                    os.rename(staging, target)  # atomic; a concurrent download may have won
                except OSError:
                    if not target.exists():
                        raise
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return target / objects[0][0] if single else target

    def _download(self, uri: str, objects: list[tuple[str, Any]], staging: Path) -> None:
        """Copy every listed object into `staging`, several at a time (google-cloud-storage's
        transfer_manager, on threads: the process pool it defaults to would fork this server)."""
        from google.api_core import exceptions as gexc
        from google.cloud.storage import transfer_manager

        pairs = []
        for rel, blob in objects:
            local = staging.joinpath(*rel.split("/"))
            local.parent.mkdir(parents=True, exist_ok=True)
            pairs.append((blob, str(local)))
        # A listed blob carries its generation, so each download gets exactly that one.
        results = transfer_manager.download_many(
            pairs, download_kwargs={"timeout": self.call_timeout, "retry": self._retry()},
            worker_type=transfer_manager.THREAD, max_workers=min(DOWNLOAD_THREADS, len(pairs)))
        for (blob, _), result in zip(pairs, results, strict=True):
            if isinstance(result, gexc.NotFound):
                raise ModelLoadError(
                    f"Cannot read {uri}: gs://{blob.bucket.name}/{blob.name} was deleted or "
                    "replaced while it was being copied.") from None
            if isinstance(result, BaseException):
                raise result  # fetch() turns storage and network errors into ModelLoadError
