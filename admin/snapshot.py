"""Snapshots: the whole state as one gzip tar archive, and its restoration.

An archive holds `mlemu-snapshot.json` (format, version, every store document but running tasks)
and `files/...`: copies of the local model directories and packages the versions name
(deploymentUri, packageUris). A path inside the state directory's models/ is kept under its path
relative to it, and restored there (the round trip is exact); any other path is kept under
`external/<digest>/` and, on import, used in place when it still exists with the same files,
else restored under the state directory's `imported/<digest>/` and the versions pointed there.

Import checks the whole archive before it changes anything: regular files and directories only
(no links, devices or FIFOs), relative member names without `..`, bounded count and total size,
a manifest of the known format. Files are written into a staging directory inside the state
directory and moved into place; store documents replace the store's in one transaction. A
damaged archive is refused whole with a message saying why.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from admin import authorize_admin
from core.errors import FailedPrecondition, InvalidArgument
from core.payloads import Caller
from registry import artifacts
from registry.store_base import KINDS, Store

if TYPE_CHECKING:
    from emulator import Emulator

FORMAT = "mlemu-snapshot"
VERSION = 1
MANIFEST = "mlemu-snapshot.json"
MAX_ARCHIVE_BYTES = 256 << 20
MAX_EXPANDED_BYTES = 1 << 30
MAX_MEMBERS = 20_000
#: Running work is not state: a restored operation is whatever the archive says it was.
SAVED_KINDS = tuple(kind for kind in KINDS if kind != "tasks")


def authorize(emu: Emulator, caller: Caller) -> None:
    authorize_admin(emu, caller)


def _damaged(why: str) -> InvalidArgument:
    return InvalidArgument(f"The snapshot archive was refused (nothing was changed): {why}")


def _local_paths(doc: dict[str, Any]) -> list[str]:
    uris = [doc.get("deployment_uri", ""), *list(doc.get("package_uris") or [])]
    out = []
    for uri in uris:
        if isinstance(uri, str) and uri and not artifacts.is_remote(uri):
            out.append(uri[7:] if uri.startswith("file://") else uri)
    return out


def _archive_key(path: Path, state_dir: Path) -> str:
    try:  # only the state directory's models/ is restored in place: never its databases
        return "files/state/models/" + path.relative_to(state_dir / "models").as_posix()
    except ValueError:
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
        return f"files/external/{digest}/{path.name}"


def export_state(store: Store, state_dir: Path) -> bytes:
    """The archive of `store` and the local files its versions use."""
    state_dir = state_dir.resolve()
    rows: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
        kind: store.rows(kind) for kind in SAVED_KINDS}
    places: dict[str, str] = {}
    for _name, _parent, doc in rows["versions"]:
        for raw in _local_paths(doc):
            path = Path(raw).resolve()
            if path.exists():
                places[str(path)] = _archive_key(path, state_dir)
    size = sum(_tree_size(Path(source)) for source in places)
    if size > MAX_EXPANDED_BYTES:
        raise FailedPrecondition(f"The versions' local files take {size} bytes; a snapshot holds "
                                 f"at most {MAX_EXPANDED_BYTES}.")
    manifest = {"format": FORMAT, "version": VERSION, "stateDir": str(state_dir), "store": rows,
                "files": places}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = json.dumps(manifest, sort_keys=True).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for source, key in sorted(places.items()):
            # dereference: a linked model file is archived as the file it points to
            tar.add(source, arcname=key, recursive=True, filter=_plain)
    if out.tell() > MAX_ARCHIVE_BYTES:  # an import would refuse it
        raise FailedPrecondition(f"The snapshot would take {out.tell()} bytes; at most "
                                 f"{MAX_ARCHIVE_BYTES} can be imported.")
    return out.getvalue()


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info if info.isfile() or info.isdir() else None


def export_snapshot(emu: Emulator, caller: Caller) -> bytes:
    authorize_admin(emu, caller)
    return export_state(emu.store, emu.settings.state_dir)


def check_archive(data: bytes) -> tuple[dict[str, Any], tarfile.TarFile]:
    """The manifest and the open archive, once every member passed (InvalidArgument if not)."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115 - returned
        members = tar.getmembers()
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise _damaged(f"it is not a readable gzip tar archive ({exc}).") from None
    if len(members) > MAX_MEMBERS:
        raise _damaged(f"it has more than {MAX_MEMBERS} members.")
    total = 0
    for member in members:
        name = PurePosixPath(member.name)
        if name.is_absolute() or ".." in name.parts or not name.parts:
            raise _damaged(f"member {member.name!r} is not a relative path inside the archive.")
        if not (member.isfile() or member.isdir()):
            raise _damaged(f"member {member.name!r} is a link or special file.")
        if member.name != MANIFEST and name.parts[0] != "files":
            raise _damaged(f"member {member.name!r} is not part of an mlemu snapshot.")
        total += member.size
        if total > MAX_EXPANDED_BYTES:
            raise _damaged(f"its files exceed {MAX_EXPANDED_BYTES} bytes.")
    try:
        handle = tar.extractfile(MANIFEST)
        manifest = json.loads(handle.read() if handle else b"")
    except (KeyError, ValueError, tarfile.TarError, OSError):
        raise _damaged(f"it has no readable {MANIFEST}.") from None
    _check_manifest(manifest)
    return manifest, tar


def _check_manifest(manifest: Any) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _damaged(f"{MANIFEST} is not an mlemu snapshot manifest.")
    if manifest.get("version") != VERSION:
        raise _damaged(f"snapshot version {manifest.get('version')!r} is not {VERSION}.")
    store, files = manifest.get("store"), manifest.get("files")
    if not isinstance(store, dict) or set(store) - set(SAVED_KINDS) or not isinstance(files, dict):
        raise _damaged(f"{MANIFEST} has no valid store or files section.")
    for kind, rows in store.items():
        if not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == 3 and isinstance(r[0], str)
                and isinstance(r[1], str) and isinstance(r[2], dict) for r in rows):
            raise _damaged(f"the {kind} documents are malformed.")
    for source, key in files.items():
        if not isinstance(source, str) or not isinstance(key, str) or ".." in key.split("/") \
                or not key.startswith(("files/state/models/", "files/external/")):
            raise _damaged(f"file entry {key!r} is malformed.")


def _same_tree(tar: tarfile.TarFile, key: str, path: Path) -> bool:
    for member in tar.getmembers():
        if member.isfile() and (member.name == key or member.name.startswith(key + "/")):
            target = path / member.name[len(key) + 1:] if member.name != key else path
            handle = tar.extractfile(member)
            if not target.is_file() or handle is None or target.read_bytes() != handle.read():
                return False
    return True


def restore_state(store: Store, state_dir: Path, data: bytes) -> None:
    """Replace `store`'s documents and the archived files with the archive's (all or nothing)."""
    manifest, tar = check_archive(data)
    state_dir = state_dir.resolve()
    # Where each archived prefix goes; external trees already in place stay where they are.
    moves: dict[str, Path] = {}
    rewrites: dict[str, str] = {}
    exported_from = manifest.get("stateDir")
    if isinstance(exported_from, str) and Path(exported_from) != state_dir:
        # Another state directory: its models/ is this one's (the round trip is exact when the
        # paths are the same, as with `serve --import` into the same place).
        rewrites[str(Path(exported_from) / "models")] = str(state_dir / "models")
    for source, key in manifest["files"].items():
        if key.startswith("files/state/"):
            moves[key] = state_dir / key[len("files/state/"):]
        elif not (Path(source).exists() and _same_tree(tar, key, Path(source))):
            moves[key] = state_dir / "imported" / key[len("files/external/"):]
            rewrites[source] = str(moves[key])
    for target in moves.values():
        if not _inside(target, state_dir):
            raise _damaged(f"{target.name} would be written outside the state directory.")
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=state_dir))
    try:
        for member in tar.getmembers():
            if member.isfile() and member.name != MANIFEST:
                out = staging / member.name
                out.parent.mkdir(parents=True, exist_ok=True)
                handle = tar.extractfile(member)
                if handle is None:
                    raise _damaged(f"member {member.name!r} cannot be read.")
                with open(out, "wb") as f:
                    shutil.copyfileobj(handle, f)
        _replace_store(store, manifest["store"], rewrites)
        for key, target in moves.items():
            staged = staging / key
            if staged.exists():
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _inside(path: Path, root: Path) -> bool:
    resolved = path.resolve()
    return resolved == root or root in resolved.parents


def _replace_store(store: Store, rows: dict[str, list[list[Any]]], rewrites: dict[str, str]) -> None:
    with store.transaction():
        for kind in KINDS:
            for name, _parent, _doc in store.rows(kind):
                store.delete(kind, name)
        for kind, found in rows.items():
            for name, parent, doc in found:
                if kind == "versions" and rewrites:
                    doc = _rewritten(doc, rewrites)
                store.put(kind, name, parent, doc)


def _rewritten(doc: dict[str, Any], rewrites: dict[str, str]) -> dict[str, Any]:
    def moved(uri: str) -> str:
        local = uri[7:] if uri.startswith("file://") else uri
        for source, target in rewrites.items():
            resolved = str(Path(local).resolve()) if local and not artifacts.is_remote(uri) else ""
            if resolved == source or resolved.startswith(source + "/"):
                return target + resolved[len(source):]
        return uri

    doc = dict(doc)
    if isinstance(doc.get("deployment_uri"), str):
        doc["deployment_uri"] = moved(doc["deployment_uri"])
    if isinstance(doc.get("package_uris"), list):
        doc["package_uris"] = [moved(u) if isinstance(u, str) else u for u in doc["package_uris"]]
    return doc


def import_snapshot(emu: Emulator, caller: Caller, data: bytes) -> dict[str, Any]:
    authorize_admin(emu, caller)
    restore_state(emu.store, emu.settings.state_dir, data)
    emu.last_use.clear()
    emu.prune_deployments()
    return {}
