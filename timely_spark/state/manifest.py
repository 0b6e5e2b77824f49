"""A checkpoint directory's layout and its manifests: the commit point of a snapshot.

::

    DIR/manifest-00000007.json          one per committed snapshot (written last, atomically)
    DIR/snapshot-00000007/worker-0/...  the state files of snapshot 7, per worker

A manifest holds the snapshot's time ``t``, the worker count, every dataflow's
fingerprint (operators by address and name), and per operator state its files with
sizes and SHA-256 checksums; its own checksum covers the rest, so an edited or torn
manifest is seen.  Only worker 0 writes manifests: a temporary file, fsync, rename,
fsync of the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from typing import Any, Iterator, Optional

from ..errors import CheckpointError

__all__ = ["FORMAT", "manifest_path", "snapshot_dir", "list_manifests", "list_snapshot_dirs", "write_manifest",
           "load_manifest", "verify_files", "file_digest", "retain", "fsync_dir", "candidates"]

#: The manifest format this version writes and reads.
FORMAT = 1

_MANIFEST = re.compile(r"^manifest-(\d+)\.json$")
_SNAPSHOT = re.compile(r"^snapshot-(\d+)$")
_TEMPORARY = re.compile(r"^manifest-\d+\.json\.tmp-\d+$")
_CHUNK = 1 << 20


def manifest_path(directory: str, seq: int) -> str:
    """The manifest file of snapshot ``seq``.

    >>> manifest_path("/ckpt", 7)
    '/ckpt/manifest-00000007.json'
    """
    return os.path.join(directory, f"manifest-{seq:08d}.json")


def snapshot_dir(directory: str, seq: int) -> str:
    """The directory of snapshot ``seq``'s state files.

    >>> snapshot_dir("/ckpt", 7)
    '/ckpt/snapshot-00000007'
    """
    return os.path.join(directory, f"snapshot-{seq:08d}")


def _numbered(directory: str, pattern: "re.Pattern[str]") -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(pattern.match, names) if m)


def list_manifests(directory: str) -> list[int]:
    """The sequence numbers of the manifest files in ``directory``, oldest first."""
    return _numbered(directory, _MANIFEST)


def list_snapshot_dirs(directory: str) -> list[int]:
    """The sequence numbers of the snapshot directories in ``directory``, oldest first."""
    return _numbered(directory, _SNAPSHOT)


def fsync_dir(path: str) -> None:
    """Make a directory's entries (a rename, a new file) durable, where the OS allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def file_digest(path: str) -> tuple[int, str]:
    """``(size, sha256 hex)`` of a file, read in chunks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _body_checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_manifest(directory: str, seq: int, body: dict) -> str:
    """Commit snapshot ``seq``: write its manifest atomically (temporary file, fsync,
    rename, fsync of the directory); returns its path."""
    body = dict(body, format=FORMAT, seq=seq)
    document = dict(body, checksum=_body_checksum(body))
    path = manifest_path(directory, seq)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(document, f, sort_keys=True, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)
    return path


def load_manifest(path: str) -> dict:
    """A manifest's contents; :class:`~timely_spark.errors.CheckpointError` naming the
    file if it cannot be read, is not JSON, or fails its own checksum."""
    try:
        with open(path) as f:
            document = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot read the manifest ({type(exc).__name__}: {exc})") from None
    if not isinstance(document, dict) or "checksum" not in document:
        raise CheckpointError(f"{path}: not a snapshot manifest (no checksum)")
    body = {k: v for k, v in document.items() if k != "checksum"}
    if _body_checksum(body) != document["checksum"]:
        raise CheckpointError(f"{path}: the manifest is damaged (its checksum does not match its contents)")
    if body.get("format") != FORMAT:
        raise CheckpointError(f"{path}: manifest format {body.get('format')!r}, this version reads {FORMAT}")
    for key in ("seq", "time", "peers", "states", "dataflows"):
        if key not in body:
            raise CheckpointError(f"{path}: the manifest has no {key!r}")
    return body


def all_files(manifest: dict) -> Iterator[dict]:
    """Every state file a manifest lists."""
    for state in manifest["states"].values():
        yield from state["files"]


def verify_files(directory: str, manifest: dict, path: str) -> None:
    """Check that every file of the manifest is there with its size and checksum;
    CheckpointError naming the first one that is not."""
    for entry in all_files(manifest):
        file = os.path.join(directory, entry["path"])
        try:
            size, digest = file_digest(file)
        except OSError as exc:
            raise CheckpointError(f"{file}: cannot read the state file of snapshot {manifest['seq']} "
                                  f"({type(exc).__name__}: {exc}; manifest {path})") from None
        if size != entry["size"] or digest != entry["sha256"]:
            raise CheckpointError(f"{file}: the state file is damaged ({size} bytes, sha256 {digest[:12]}..., "
                                  f"but the manifest {path} says {entry['size']} bytes, "
                                  f"sha256 {entry['sha256'][:12]}...)")


def candidates(directory: str) -> Iterator[tuple[str, Any]]:
    """Each manifest of ``directory``, newest first: ``(path, manifest)`` for a usable one
    (readable, and every file it lists intact) or ``(path, CheckpointError)`` for one
    that is not."""
    for seq in reversed(list_manifests(directory)):
        path = manifest_path(directory, seq)
        try:
            manifest = load_manifest(path)
            verify_files(directory, manifest, path)
        except CheckpointError as exc:
            yield path, exc
            continue
        yield path, manifest


def retain(directory: str, keep: int, current: Optional[int] = None, protect: Optional[int] = None) -> None:
    """Keep the newest ``keep`` manifests (and their snapshot directories); delete older
    manifests first (so they are no longer committed), then their directories, and any
    snapshot directory older than the newest manifest that no manifest commits
    (left by a run that failed while writing it), and temporary manifests left by a
    worker 0 that died before renaming one (only worker 0 writes them, one at a time).  ``current``: a snapshot being
    written (never deleted); ``protect``: the snapshot a running restored run restores from
    (its dataflows may not all be built yet, and each reads its state when it is), kept
    with its manifest however many newer ones there are."""
    seqs = list_manifests(directory)
    kept = set(seqs[-keep:]) if keep > 0 else set()
    if protect is not None:
        kept.add(protect)
    for seq in seqs:
        if seq not in kept:
            try:
                os.remove(manifest_path(directory, seq))
            except FileNotFoundError:
                pass
    newest = seqs[-1] if seqs else -1
    for name in os.listdir(directory):          # temporary manifests of a writer that died before its rename
        if _TEMPORARY.match(name):
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                pass
    for seq in list_snapshot_dirs(directory):
        if seq not in kept and seq != current and seq < newest:
            shutil.rmtree(snapshot_dir(directory, seq), ignore_errors=True)
