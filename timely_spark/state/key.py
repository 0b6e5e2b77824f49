"""The checkpoint key: who may write what a restore reads.

Every state file and every manifest of a checkpoint carries an HMAC-SHA256 under the
*checkpoint key*, and a restore (or :func:`~timely_spark.state.read_snapshot`) checks it
before it parses a byte of the file: a file written by anyone without the key is refused,
naming it, and is never unpickled.  The key is 32 bytes derived with HKDF-SHA256 from,
in this order:

1. ``Config.checkpoint_key`` (bytes or str), when a program sets it;
2. ``$TIMELY_SPARK_SECRET`` (the secret that processes started by hand share already);
3. the user's key file ``~/.timely_spark/checkpoint.key`` (32 random bytes, mode 0600),
   made on first use -- right for runs on one machine (threads, local processes,
   ``local[N]`` Spark), where every run of the same user finds the same file.

The key is resolved once where the run starts (``ts.execute``, the Spark driver) and
travels with the run's Config, so executors never need the file.  To restore a
checkpoint later, keep what made its key: the same ``$TIMELY_SPARK_SECRET``, or the key
file.  A restore under another key fails with a :class:`CheckpointError` that says so.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from typing import Any, Union

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import CheckpointError
from ..runtime import SECRET_ENV

__all__ = ["KEY_FILE", "checkpoint_secret", "file_key", "resolve_key", "key_id", "mac", "Mac"]

#: The per-user key file used when neither ``Config.checkpoint_key`` nor
#: ``$TIMELY_SPARK_SECRET`` is set.
KEY_FILE = os.path.join("~", ".timely_spark", "checkpoint.key")

_INFO = b"timely-spark checkpoint files v1"
_ID_INFO = b"timely-spark checkpoint key id v1"
_KEY_BYTES = 32


def _derive(secret: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=_KEY_BYTES, salt=None, info=info).derive(secret)


def _key_file_secret() -> bytes:
    path = os.path.expanduser(KEY_FILE)
    try:
        with open(path, "rb") as f:
            secret = f.read()
    except FileNotFoundError:
        secret = b""
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint key file ({type(exc).__name__}: {exc}); "
                              f"set ${SECRET_ENV} instead") from None
    if secret:
        if len(secret) < _KEY_BYTES:
            raise CheckpointError(f"{path}: the checkpoint key file holds {len(secret)} bytes, not "
                                  f"{_KEY_BYTES}: delete it (snapshots written under it can then no longer be "
                                  f"restored) or set ${SECRET_ENV}")
        return secret
    try:        # a temporary file linked into place: a racing process reads a whole file or makes its own
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.remove(tmp)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot make the checkpoint key file ({type(exc).__name__}: {exc}); "
                              f"set ${SECRET_ENV} to a secret to keep instead") from None
    return _key_file_secret()


def checkpoint_secret() -> bytes:
    """The secret a run without ``Config.checkpoint_key`` derives its checkpoint key from:
    ``$TIMELY_SPARK_SECRET``, else the user's key file (made on first use)."""
    env = os.environ.get(SECRET_ENV)
    return env.encode() if env else _key_file_secret()


def file_key(secret: Union[bytes, str, None] = None) -> bytes:
    """The 32-byte checkpoint key derived from ``secret`` (None: :func:`checkpoint_secret`).

    >>> file_key(b"s3cret") == file_key("s3cret") != file_key(b"other")
    True
    """
    if secret is None:
        secret = checkpoint_secret()
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, (bytes, bytearray)) or not secret:
        raise CheckpointError(f"checkpoint_key must be non-empty bytes or str, got {secret!r:.40}")
    return _derive(bytes(secret), _INFO)


def resolve_key(config: Any) -> None:
    """Where a run with a checkpoint starts: fill ``config.checkpoint_key`` with
    :func:`checkpoint_secret` unless the program gave one, so that the run's processes
    and executors share it (they never read the key file or the environment)."""
    if config.checkpoint is not None and config.checkpoint_key is None:
        config.checkpoint_key = checkpoint_secret()


def key_id(key: bytes) -> str:
    """A public name of a key (not the key): what a manifest records, so that a restore
    under another key can say so.

    >>> len(key_id(file_key(b"x"))), key_id(file_key(b"x")) == key_id(file_key(b"y"))
    (16, False)
    """
    return _derive(key, _ID_INFO)[:8].hex()


class Mac:
    """An incremental HMAC-SHA256 under the checkpoint key, bound to a ``purpose`` (a
    state file's path in its checkpoint, or ``"manifest"``) so one file's MAC does not
    vouch for another."""

    def __init__(self, key: bytes, purpose: str) -> None:
        self._h = hmac.new(key, purpose.encode() + b"\0", hashlib.sha256)

    def update(self, data: bytes) -> None:
        self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def mac(key: bytes, purpose: str, data: bytes) -> str:
    """The hex HMAC of ``data`` for ``purpose``.

    >>> mac(b"k" * 32, "manifest", b"{}") == mac(b"k" * 32, "other", b"{}")
    False
    """
    m = Mac(key, purpose)
    m.update(data)
    return m.hexdigest()
