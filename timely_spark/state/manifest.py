"""A checkpoint directory's layout and its manifests: the commit point of a snapshot.

::

    DIR/manifest-00000007.json          one per committed snapshot (written last, atomically)
    DIR/snapshot-00000007/worker-0/...  the state files of snapshot 7, per worker

A manifest holds the snapshot's time ``t``, the worker count, every dataflow's
fingerprint (operators by address and name), and per operator state its files with
sizes and HMAC-SHA256s under the checkpoint key (:mod:`.key`); its own SHA-256
checksum covers the rest (so a torn manifest is told from a forged one) and its HMAC
the rest and the checksum, so a manifest or state file written by anyone without the
key is refused before a byte of it is parsed.  Only worker 0 writes manifests: a
temporary file, fsync, rename, fsync of the directory.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
from typing import Any, Iterator, Optional

from ..errors import CheckpointError
from ..runtime import SECRET_ENV
from .key import KEY_FILE, Mac, key_id, mac

__all__ = ["FORMAT", "manifest_path", "snapshot_dir", "list_manifests", "list_snapshot_dirs", "write_manifest",
           "load_manifest", "verify_files", "file_digest", "read_verified", "retain", "fsync_dir", "candidates"]

#: The manifest format this version writes and reads (2: authenticated with the checkpoint key;
#: 3: the graph stream forms' state in the core's keyed-parts encoding).
FORMAT = 3

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


def file_digest(path: str, key: bytes, purpose: str) -> tuple[int, str]:
    """``(size, HMAC-SHA256 hex)`` of a file under ``key`` for ``purpose`` (its path in
    the checkpoint), read in chunks."""
    h = Mac(key, purpose)
    size = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def write_manifest(directory: str, seq: int, body: dict, key: bytes) -> str:
    """Commit snapshot ``seq``: write its manifest, authenticated under ``key``,
    atomically (temporary file, fsync, rename, fsync of the directory); returns its path."""
    body = dict(body, format=FORMAT, seq=seq, key_id=key_id(key))
    body["checksum"] = hashlib.sha256(_canonical(body)).hexdigest()
    document = dict(body, mac=mac(key, "manifest", _canonical(body)))
    path = manifest_path(directory, seq)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(document, f, sort_keys=True, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:              # a full disk: name the file; the snapshot is not committed
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise CheckpointError(f"{path}: cannot write the manifest of snapshot {seq} ({type(exc).__name__}: "
                              f"{exc}); the snapshot is not committed") from exc
    fsync_dir(directory)
    return path


def load_manifest(path: str, key: bytes) -> dict:
    """A manifest's contents, once its HMAC under ``key`` is checked;
    :class:`~timely_spark.errors.CheckpointError` naming the file if it cannot be read,
    is not JSON, is torn, or was not written by a holder of ``key`` (another key, an
    older version that wrote no MAC, or a forgery)."""
    try:
        with open(path) as f:
            document = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot read the manifest ({type(exc).__name__}: {exc})") from None
    if not isinstance(document, dict) or "checksum" not in document:
        raise CheckpointError(f"{path}: not a snapshot manifest (no checksum)")
    body = {k: v for k, v in document.items() if k != "mac"}
    if not hmac.compare_digest(str(document.get("mac", "")), mac(key, "manifest", _canonical(body))):
        unsummed = {k: v for k, v in body.items() if k != "checksum"}
        if hashlib.sha256(_canonical(unsummed)).hexdigest() != body["checksum"]:
            raise CheckpointError(f"{path}: the manifest is damaged (its checksum does not match its contents)")
        if "mac" not in document:
            raise CheckpointError(f"{path}: the manifest is not authenticated (written by an older version, "
                                  f"without a checkpoint key): it is not trusted, so the snapshot is not restored")
        if body.get("key_id") != key_id(key):
            raise CheckpointError(f"{path}: the manifest was written under another checkpoint key (key id "
                                  f"{body.get('key_id')!r}; this run's is {key_id(key)!r}): restore with the "
                                  f"${SECRET_ENV} (or checkpoint_key=, or key file {KEY_FILE}) the run that "
                                  f"wrote it had")
        raise CheckpointError(f"{path}: the manifest's MAC does not match: it was not written by a holder of the "
                              f"checkpoint key (altered or forged), so it is not trusted")
    if body.get("format") != FORMAT:
        raise CheckpointError(f"{path}: manifest format {body.get('format')!r}, this version reads {FORMAT}: the "
                              f"snapshot was written by another version of timely_spark; restore it with that "
                              f"version, or start this one on a new checkpoint directory")
    for name in ("seq", "time", "peers", "states", "dataflows"):
        if name not in body:
            raise CheckpointError(f"{path}: the manifest has no {name!r}")
    return body


def all_files(manifest: dict) -> Iterator[dict]:
    """Every state file a manifest lists."""
    for state in manifest["states"].values():
        yield from state["files"]


def _damaged(file: str, size: int, entry: dict, path: str) -> CheckpointError:
    return CheckpointError(f"{file}: the state file is damaged or was not written by a holder of the checkpoint "
                           f"key ({size} bytes, but its HMAC does not match what the manifest {path} says for "
                           f"{entry['size']} bytes): it is not trusted")


def verify_files(directory: str, manifest: dict, path: str, key: bytes) -> None:
    """Check that every file of the (authenticated) manifest is there with its size and
    HMAC under ``key``; CheckpointError naming the first one that is not."""
    for entry in all_files(manifest):
        file = os.path.join(directory, entry["path"])
        try:
            size, digest = file_digest(file, key, entry["path"])
        except OSError as exc:
            raise CheckpointError(f"{file}: cannot read the state file of snapshot {manifest['seq']} "
                                  f"({type(exc).__name__}: {exc}; manifest {path})") from None
        if size != entry["size"] or not hmac.compare_digest(digest, str(entry.get("mac", ""))):
            raise _damaged(file, size, entry, path)


def read_verified(directory: str, entry: dict, path: str, key: bytes) -> bytes:
    """The bytes of a state file of the manifest ``path``, read once and checked against
    its HMAC before they are returned (what is parsed is what was checked)."""
    file = os.path.join(directory, entry["path"])
    try:
        with open(file, "rb") as f:
            data = f.read(int(entry["size"]) + 1)
    except OSError as exc:
        raise CheckpointError(f"{file}: cannot read the state file ({type(exc).__name__}: {exc}; "
                              f"manifest {path})") from None
    if len(data) != entry["size"] or not hmac.compare_digest(mac(key, entry["path"], data),
                                                             str(entry.get("mac", ""))):
        raise _damaged(file, len(data), entry, path)
    return data


def candidates(directory: str, key: bytes) -> Iterator[tuple[str, Any]]:
    """Each manifest of ``directory``, newest first: ``(path, manifest)`` for a usable one
    (readable, and every file it lists intact) or ``(path, CheckpointError)`` for one
    that is not."""
    for seq in reversed(list_manifests(directory)):
        path = manifest_path(directory, seq)
        try:
            manifest = load_manifest(path, key)
            verify_files(directory, manifest, path, key)
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
