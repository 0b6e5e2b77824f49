"""EventWriter / EventReader: events over a socket or a file.

Each event is one frame: a length, an HMAC-SHA256 of the payload under a shared
secret, and the payload (pickle protocol 5).  The reader checks the HMAC before it
unpickles anything, so a socket accepts events only from a writer that knows the
secret; sockets require one (default: ``$TIMELY_SPARK_SECRET``), files may go without.
``close()`` writes an end frame: the reader then reports the end of the stream.

>>> import io, timely_spark as ts
>>> from timely_spark.capture import EventReader, EventWriter, Messages
>>> buf = io.BytesIO()
>>> w = EventWriter(buf, secret=b"k"); w.push(Messages(0, [1, 2])); w.close()
>>> r = EventReader(io.BytesIO(buf.getvalue()), secret=b"k")
>>> r.next()
Messages(time=0, data=[1, 2])
>>> r.next()
Traceback (most recent call last):
StopIteration
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import socket
import struct
from pathlib import Path
from typing import Any, Optional

from ..errors import EventStreamError
from ..runtime import SECRET_ENV

__all__ = ["EventWriter", "EventReader", "EventStreamError", "shared_secret"]

_HEAD = struct.Struct("<QB")          # payload length, kind
_DATA, _END = 1, 2
_MAC = 32


def shared_secret(what: str) -> bytes:
    """The secret in ``$TIMELY_SPARK_SECRET``; a ValueError naming ``what`` needs it if unset
    (jobs call it first, to fail at once rather than after connecting)."""
    secret = _secret(None, True, what)
    assert secret is not None
    return secret


def _secret(secret: Optional[Any], required: bool, what: str) -> Optional[bytes]:
    if secret is None:
        env = os.environ.get(SECRET_ENV)
        secret = env.encode() if env else None
    if isinstance(secret, str):
        secret = secret.encode()
    if required and not secret:
        raise ValueError(f"{what} over a socket needs a shared secret (secret=..., or ${SECRET_ENV}: "
                         f"export {SECRET_ENV}=$(python -c 'import secrets; print(secrets.token_hex(16))'))")
    return secret


def _mac(secret: Optional[bytes], kind: int, payload: bytes) -> bytes:
    if not secret:
        return bytes(_MAC)
    return hmac.new(secret, bytes([kind]) + payload, hashlib.sha256).digest()


class EventWriter:
    """Push events into a socket, a binary file object, or a file path (appended)."""

    def __init__(self, target: Any, secret: Optional[Any] = None) -> None:
        self._sock = target if isinstance(target, socket.socket) else None
        self._own = isinstance(target, (str, Path))
        self._file: Any = open(target, "ab") if self._own else (None if self._sock else target)
        self._secret = _secret(secret, self._sock is not None, "EventWriter")
        self.closed = False

    def _write(self, kind: int, payload: bytes) -> None:
        frame = _HEAD.pack(len(payload), kind) + _mac(self._secret, kind, payload) + payload
        if self._sock is not None:
            self._sock.sendall(frame)
        else:
            self._file.write(frame)
            self._file.flush()

    def push(self, event: Any) -> None:
        """Write one event as an authenticated frame."""
        self._write(_DATA, pickle.dumps(event, protocol=5))

    def close(self) -> None:
        """Write the end frame (the reader then stops) and close a file this writer opened (idempotent)."""
        if not self.closed:
            self.closed = True
            self._write(_END, b"")
            if self._own:
                self._file.close()


class EventReader:
    """Events from a socket, a binary file object or a file path, without blocking:
    ``next()`` returns an event, None when no whole frame has arrived yet, and raises
    StopIteration after the writer's end frame (or when a socket closes)."""

    def __init__(self, source: Any, secret: Optional[Any] = None) -> None:
        self._sock = source if isinstance(source, socket.socket) else None
        self._file: Any = open(source, "rb") if isinstance(source, (str, Path)) else (None if self._sock else source)
        self._name = str(source) if isinstance(source, (str, Path)) else repr(source)
        self._secret = _secret(secret, self._sock is not None, "EventReader")
        self._buf = bytearray()
        self._ended = False
        self._eof = False
        if self._sock is not None:
            self._sock.setblocking(False)

    def _fill(self) -> None:
        if self._sock is not None:
            while True:
                try:
                    chunk = self._sock.recv(1 << 20)
                except (BlockingIOError, InterruptedError):
                    return
                if not chunk:
                    self._eof = True
                    return
                self._buf += chunk
        else:
            chunk = self._file.read()
            if chunk:
                self._buf += chunk

    def next(self) -> Any:
        """The next event, None when no whole frame has arrived yet, StopIteration after the end frame;
        EventStreamError for a frame that fails its HMAC.
        """
        if self._ended:
            raise StopIteration
        if len(self._buf) < _HEAD.size + _MAC:
            self._fill()
        if len(self._buf) >= _HEAD.size + _MAC:
            length, kind = _HEAD.unpack_from(self._buf, 0)
            total = _HEAD.size + _MAC + length
            if len(self._buf) < total:
                self._fill()
            if len(self._buf) >= total:
                mac = bytes(self._buf[_HEAD.size:_HEAD.size + _MAC])
                payload = bytes(self._buf[_HEAD.size + _MAC:total])
                if kind not in (_DATA, _END) or not hmac.compare_digest(mac, _mac(self._secret, kind, payload)):
                    raise EventStreamError(f"{self._name}: a frame failed authentication or is not an event frame")
                del self._buf[:total]
                if kind == _END:
                    self._ended = True
                    raise StopIteration
                return pickle.loads(payload)
        if self._eof:
            if self._buf:
                raise EventStreamError(f"{self._name}: the stream ended in the middle of a frame")
            raise StopIteration
        return None
