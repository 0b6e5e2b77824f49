"""EventWriter / EventReader: events over a socket or a file.

Over a socket (which needs a shared secret; default ``$TIMELY_SPARK_SECRET``) the
stream is sealed like the worker mesh (see :mod:`timely_spark.communication.aead`):
each end first sends a greeting and a random nonce; the key is derived with HKDF from
the secret and both nonces (so it differs per connection); every event is one frame --
its length in clear (the associated data), then the event (pickle protocol 5)
encrypted with AES-256-GCM (ChaCha20-Poly1305 without AES instructions) under the
frame's number as nonce, then the tag.  The reader checks the tag before it unpickles
anything: a frame injected, altered, replayed, reordered or dropped fails the stream
with :class:`~timely_spark.errors.EventStreamError`, and a recorder of the traffic
learns only sizes and timing.  With ``TIMELY_SPARK_ENCRYPTION=off`` the events travel
in clear, still authenticated.  The writer's first event waits (bounded) for the
reader's greeting.

A file written with a secret is sealed the same way, under the writer's nonce alone (a
file has no reader to answer); without a secret, frames are plain.  ``close()`` writes
an end frame: the reader then reports the end of the stream.

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

import os
import pickle
import socket
import struct
import time
from pathlib import Path
from typing import Any, Optional

from ..communication.aead import TAG, Opener, Sealer, derive_keys, encryption_enabled, greeting, mode
from ..errors import EventStreamError
from ..runtime import DEFAULT_CONNECT_TIMEOUT, SECRET_ENV

__all__ = ["EventWriter", "EventReader", "EventStreamError", "shared_secret"]

#: Bytes an event frame over a socket may announce (``EventWriter``/``EventReader``): the
#: reader refuses a larger announcement before buffering any of it (it comes before the
#: tag can be checked), and the writer refuses to send such an event.
MAX_EVENT_FRAME = 1 << 30

_HEAD = struct.Struct("<Q")           # in clear: the length of what follows (sealed: kind and event, tag excluded)
_DATA, _END = 1, 2
_PREFIX = b"TSEVNT3"                  # a greeting: this and one byte naming the mode (see aead.greeting)
_NONCE = 32
_HELLO = len(_PREFIX) + 1 + _NONCE


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


def _key(secret: bytes, reader_nonce: bytes, writer_hello: bytes) -> bytes:
    return derive_keys(secret, reader_nonce + writer_hello[-_NONCE:], b"events " + writer_hello[:-_NONCE], 1)[0]


class EventWriter:
    """Push events into a socket, a binary file object, or a file path (appended);
    sealed when there is a secret (required for sockets)."""

    def __init__(self, target: Any, secret: Optional[Any] = None) -> None:
        self._sock = target if isinstance(target, socket.socket) else None
        self._own = isinstance(target, (str, Path))
        self._file: Any = open(target, "ab") if self._own else (None if self._sock else target)
        self._name = str(target) if self._own else repr(target)
        self._secret = _secret(secret, self._sock is not None, "EventWriter")
        self._sealer: Optional[Sealer] = None
        self.closed = False
        if self._secret:
            self._hello = greeting(_PREFIX, encryption_enabled()) + os.urandom(_NONCE)
            self._raw(self._hello)
            if self._sock is None:                     # a file: keyed by the writer's nonce alone
                cipher, encrypt = mode(self._hello[:-_NONCE])    # type: ignore[misc]
                self._sealer = Sealer(_key(self._secret, b"", self._hello), cipher, encrypt, peer=self._name)

    def _raw(self, data: bytes) -> None:
        if self._sock is not None:
            self._sock.sendall(data)
        else:
            self._file.write(data)
            self._file.flush()

    def _keyed(self) -> Sealer:
        """The sealer, once the reader's greeting has come (a socket's first event waits for it)."""
        if self._sealer is None:
            sock = self._sock
            assert sock is not None and self._secret
            before = sock.gettimeout()
            deadline = time.monotonic() + DEFAULT_CONNECT_TIMEOUT
            got = b""
            try:
                while len(got) < _HELLO:
                    sock.settimeout(max(0.001, deadline - time.monotonic()))
                    chunk = sock.recv(_HELLO - len(got))
                    if not chunk:
                        raise EventStreamError(f"{self._name}: the reader closed before greeting")
                    got += chunk
            except socket.timeout as exc:
                raise EventStreamError(f"{self._name}: no reader greeted within {DEFAULT_CONNECT_TIMEOUT:g} s") from exc
            finally:
                sock.settimeout(before)
            theirs = mode(got[:-_NONCE]) if got.startswith(_PREFIX) else None
            ours = mode(self._hello[:-_NONCE])
            assert ours is not None
            if theirs is None:
                raise EventStreamError(f"{self._name}: the other end is not an EventReader")
            if theirs[1] != ours[1]:
                raise EventStreamError(f"{self._name}: one end encrypts and the other does not: set "
                                       "TIMELY_SPARK_ENCRYPTION the same on both")
            self._sealer = Sealer(_key(self._secret, got[-_NONCE:], self._hello), ours[0], ours[1], peer=self._name)
        return self._sealer

    def _write(self, kind: int, payload: bytes) -> None:
        if self._sock is not None and 1 + len(payload) > MAX_EVENT_FRAME:
            raise EventStreamError(f"{self._name}: an event of {len(payload)} bytes pickled is over the limit "
                                   f"of {MAX_EVENT_FRAME} a socket's reader accepts "
                                   "(timely_spark.capture.stream_io.MAX_EVENT_FRAME)")
        if self._secret:
            header = _HEAD.pack(1 + len(payload))
            parts = self._keyed().seal(header, [bytes([kind]), payload])
            frame = header + b"".join(bytes(p) for p in parts)
        else:
            frame = _HEAD.pack(1 + len(payload)) + bytes([kind]) + payload
        self._raw(frame)

    def push(self, event: Any) -> None:
        """Write one event as a sealed (or, to a file without a secret, plain) frame."""
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
    StopIteration after the writer's end frame (or when a socket closes).

    Events are pickles, and unpickling runs code: a file is read sealed (with the secret
    it was written with: every frame's tag checked before it is unpickled), or, without a
    secret, only when ``allow_pickle=True`` says the file is trusted (else
    :class:`~timely_spark.errors.EventStreamError` naming it, before anything is read)."""

    def __init__(self, source: Any, secret: Optional[Any] = None, *, allow_pickle: bool = False) -> None:
        self._sock = source if isinstance(source, socket.socket) else None
        self._name = str(source) if isinstance(source, (str, Path)) else repr(source)
        self._secret = _secret(secret, self._sock is not None, "EventReader")
        if not self._secret and not allow_pickle:
            raise EventStreamError(f"{self._name}: an event file read without a secret is unpickled unchecked "
                                   "(unpickling runs code): pass the secret it was written with (secret=..., or "
                                   f"${SECRET_ENV}), or allow_pickle=True if you trust the file")
        self._file: Any = open(source, "rb") if isinstance(source, (str, Path)) else (None if self._sock else source)
        self._opener: Optional[Opener] = None
        self._nonce = b""
        self._buf = bytearray()
        self._ended = False
        self._eof = False
        if self._sock is not None:
            self._nonce = os.urandom(_NONCE)
            self._sock.sendall(greeting(_PREFIX, encryption_enabled()) + self._nonce)
            self._sock.setblocking(False)

    def _fill(self, need: int) -> None:
        """Read what has arrived; from a socket, only until the buffer holds ``need`` bytes
        (so what an unauthenticated sender pushes is never buffered beyond one frame)."""
        if self._sock is not None:
            while len(self._buf) < need:
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

    def _greeted(self) -> bool:
        """Whether the writer's greeting has been read (and the key derived)."""
        if self._opener is not None or not self._secret:
            return True
        if len(self._buf) < _HELLO:
            self._fill(_HELLO)
        if len(self._buf) < _HELLO:
            return False
        hello = bytes(self._buf[:_HELLO])
        named = mode(hello[:-_NONCE]) if hello.startswith(_PREFIX) else None
        if named is None:
            raise EventStreamError(f"{self._name}: not a sealed event stream (no writer's greeting)")
        if named[1] != encryption_enabled() and self._sock is not None:
            raise EventStreamError(f"{self._name}: one end encrypts and the other does not: set "
                                   "TIMELY_SPARK_ENCRYPTION the same on both")
        del self._buf[:_HELLO]
        self._opener = Opener(_key(self._secret, self._nonce, hello), named[0], named[1])
        return True

    def next(self) -> Any:
        """The next event, None when no whole frame has arrived yet, StopIteration after the end frame;
        EventStreamError for a frame that fails its tag.
        """
        if self._ended:
            raise StopIteration
        tag = TAG if self._secret else 0
        if self._greeted():
            if len(self._buf) < _HEAD.size:
                self._fill(_HEAD.size)
            if len(self._buf) >= _HEAD.size:
                (length,) = _HEAD.unpack_from(self._buf, 0)
                if self._sock is not None and length > MAX_EVENT_FRAME:      # before buffering any of it
                    raise EventStreamError(f"{self._name}: the writer announced a frame of {length} bytes, over the "
                                           f"limit of {MAX_EVENT_FRAME} "
                                           "(timely_spark.capture.stream_io.MAX_EVENT_FRAME)")
                total = _HEAD.size + length + tag
                if len(self._buf) < total:
                    self._fill(total)
                if len(self._buf) >= total:
                    header = bytes(self._buf[:_HEAD.size])
                    body = memoryview(bytes(self._buf[_HEAD.size:total]))
                    del self._buf[:total]
                    plain = self._opener.open(header, body) if self._opener is not None else body
                    if plain is None or plain.nbytes < 1 or plain[0] not in (_DATA, _END):
                        raise EventStreamError(f"{self._name}: a frame failed authentication or is not an event "
                                               "frame")
                    if plain[0] == _END:
                        self._ended = True
                        raise StopIteration
                    return pickle.loads(plain[1:])
        if self._eof:
            if self._buf:
                raise EventStreamError(f"{self._name}: the stream ended in the middle of a frame")
            raise StopIteration
        return None
