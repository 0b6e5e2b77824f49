"""One run at a time in a directory: an exclusive ``flock`` on ``<dir>/_OWNER``.

A checkpoint directory (held where the run starts, for the whole run, retries
included) and each ``worker=<i>`` directory of an output log (held by its
``ParquetEventWriter`` until it is closed) belong to one run at a time.  A second run
that points at one is refused at once with an error naming the directory and the
run holding it (its id, process and host, written into the file by the holder).

The lock is the kernel's: it goes with the process that holds it, however that
process ends (a SIGKILL, an executor lost), so a crashed owner never holds a directory
for ever and a retry can start at once.  It holds between processes of one machine
and, on Linux, across the machines of an NFS mount; on a file system without locks
it is not taken (the run goes on unguarded, as it did before).
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import socket
import uuid
from typing import Any, Optional

try:
    import fcntl
except ImportError:  # pragma: no cover -- not a POSIX system: no lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["OWNER_FILE", "OwnerLock"]

#: The lock file in an owned directory (readers of logs and checkpoints ignore it).
OWNER_FILE = "_OWNER"

#: Bytes of the holder's description read back for the error.
_DESCRIPTION_BYTES = 4096


def _describe(raw: bytes) -> str:
    try:
        owner = json.loads(raw.decode())
        return (f"run {owner['run']} (process {owner['pid']} on host {owner['host']}, "
                f"since {owner['since']})")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return "a run that has not said who it is yet"


class OwnerLock:
    """Hold ``directory`` for this run, or raise ``error`` (an exception class) naming
    it, ``what`` it is, and the run holding it.  :meth:`release` (or the process's end)
    frees it.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> first = OwnerLock(d, "the checkpoint directory", RuntimeError, run="first")
    >>> try:
    ...     OwnerLock(d, "the checkpoint directory", RuntimeError, run="second")
    ... except RuntimeError as exc:
    ...     print(str(exc)[len(d):].split(" (process")[0])
    : the checkpoint directory is in use by run first
    >>> first.release()
    >>> OwnerLock(d, "the checkpoint directory", RuntimeError, run="second").release()
    """

    def __init__(self, directory: Any, what: str, error: type, run: Optional[str] = None) -> None:
        self.path = os.path.join(os.fspath(directory), OWNER_FILE)
        self._file: Any = None
        if fcntl is None:
            return
        os.makedirs(os.fspath(directory), exist_ok=True)
        f = open(self.path, "a+b")
        try:
            if not self._lock(f):
                gc.collect()               # a finished run of this process whose objects are not collected yet
                if not self._lock(f):
                    f.seek(0)
                    holder = _describe(f.read(_DESCRIPTION_BYTES))
                    raise error(f"{os.fspath(directory)}: {what} is in use by {holder}; two runs must not share "
                                f"it: wait for that run to end (or stop it), or give this run another directory")
        except BaseException:
            f.close()
            raise
        owner = {"run": run or uuid.uuid4().hex[:12], "pid": os.getpid(), "host": socket.gethostname(),
                 "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        f.truncate(0)
        f.write(json.dumps(owner).encode())
        f.flush()
        self._file = f

    @staticmethod
    def _lock(f: Any) -> bool:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:                    # a file system without locks: go on unguarded
            return True
        return True

    def release(self) -> None:
        """Free the directory (idempotent); the lock file stays, empty of meaning."""
        f, self._file = self._file, None
        if f is not None:
            f.close()                      # closing the file releases its flock

    def __enter__(self) -> "OwnerLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
