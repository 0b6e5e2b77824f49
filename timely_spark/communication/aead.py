"""Sealed frames: the one home of the AEAD every wire of the package uses.

The worker mesh (:mod:`.tcp`), the TCP event streams
(:mod:`timely_spark.capture.stream_io`) and the driver rendezvous
(:mod:`timely_spark.spark.rendezvous`) all protect their bytes the same way:

* **Keys** come from HKDF-SHA256 over the shared secret, salted with the random nonces
  both ends sent in their handshake, one key per direction (:func:`derive_keys`): keys
  differ per connection, per direction and per run, and the secret never crosses the wire.
* **Each frame** is sealed with an AEAD -- AES-256-GCM, or ChaCha20-Poly1305 on a CPU
  without AES instructions (:func:`default_cipher`) -- under its direction's key, with
  the frame's number in that direction as the nonce and the frame's clear header as
  associated data.  A :class:`Sealer` numbers frames from 0 and refuses to seal more
  than its limit (:data:`~timely_spark.communication.aead.MAX_FRAMES_PER_KEY`), so no nonce is ever
  used twice; an :class:`Opener` expects the same numbers in order, so a frame that is
  injected, altered, replayed, reordered or dropped fails its tag.
* With encryption off (``TIMELY_SPARK_ENCRYPTION=off``, see
  :func:`~timely_spark.communication.aead.encryption_enabled`) the payload travels in clear but
  the tag still covers header and payload: authentication stays.

>>> keys = derive_keys(b"secret", b"nonce-a" + b"nonce-b", b"example", 2)
>>> sealer, opener = Sealer(keys[0]), Opener(keys[0])
>>> header = b"len=5"
>>> sealed = sealer.seal(header, [b"hel", b"lo"])
>>> b"hello" in b"".join(bytes(p) for p in sealed)          # encrypted
False
>>> bytes(opener.open(header, memoryview(b"".join(bytes(p) for p in sealed))))
b'hello'
>>> opener.open(header, memoryview(b"".join(bytes(p) for p in sealed))) is None   # a replay: frame 1 expected
True
"""

from __future__ import annotations

import functools
import os
from typing import Any, Optional, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import FrameLimitReached

__all__ = ["TAG", "AES_GCM", "CHACHA20_POLY1305", "default_cipher", "greeting", "mode", "derive_keys", "Sealer",
           "Opener", "buffer"]

#: Frames one key may seal: each direction of a connection numbers its frames from 0,
#: and the number is the AEAD nonce (64 bits of a 96-bit nonce), so a nonce is never
#: reused.  A connection that reaches this many frames in a direction closes (the run
#: fails naming the peer) rather than wrap.  2**48 frames take nine years at a million
#: frames a second; tests lower it (``frame_limit=``) to see the closing.
MAX_FRAMES_PER_KEY = 2 ** 48

#: Environment variable that turns the encryption of the wires off for a trusted
#: network: ``TIMELY_SPARK_ENCRYPTION=off``.  Frames are then still authenticated (an
#: AEAD tag over header and payload, per-connection keys, numbered): only
#: confidentiality is given up.  Every process of a run must agree (a peer that does
#: not is refused in the handshake, saying so).  Any other value, or unset: encrypted.
ENCRYPTION_ENV = "TIMELY_SPARK_ENCRYPTION"


def encryption_enabled() -> bool:
    """Whether this process encrypts its wires: True unless ``$TIMELY_SPARK_ENCRYPTION``
    is ``off`` (or ``0``, ``false``, ``no``); authentication stays either way.

    >>> import os
    >>> os.environ.pop(ENCRYPTION_ENV, None) and None
    >>> encryption_enabled()
    True
    """
    return os.environ.get(ENCRYPTION_ENV, "on").strip().lower() not in ("off", "0", "false", "no")


TAG = 16                        # bytes of the AEAD tag after every sealed frame
KEY = 32                        # bytes of a key (AES-256, ChaCha20)
AES_GCM = "AES-256-GCM"
CHACHA20_POLY1305 = "ChaCha20-Poly1305"
#: Whether this cryptography seals and opens into buffers of ours (``encrypt_into``, 45 and later);
#: the default of :class:`Sealer` and :class:`Opener` ``buffer_api``.  Without it, one-shot calls.
BUFFER_API = hasattr(AESGCM, "encrypt_into")
_STREAM_FROM = 64 * 1024        # frames of several parts this large are encrypted part by part (no join copy)


@functools.lru_cache(maxsize=1)
def default_cipher() -> str:
    """The AEAD this machine runs fastest: AES-256-GCM when the CPU has AES instructions
    (the ``aes`` flag of ``/proc/cpuinfo``; assumed where that file does not exist),
    else ChaCha20-Poly1305.  The side of a wire that greets first names its cipher in
    its greeting (:func:`greeting`), and both ends use that one.

    >>> default_cipher() in (AES_GCM, CHACHA20_POLY1305)
    True
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return AES_GCM if " aes" in line.split(":", 1)[1] + " " else CHACHA20_POLY1305
    except OSError:
        pass
    return AES_GCM


_MODES = {b"A": (AES_GCM, True), b"C": (CHACHA20_POLY1305, True), b"P": (AES_GCM, False)}


def greeting(prefix: bytes, encrypt: bool) -> bytes:
    """The magic a wire's first message starts with: ``prefix`` (7 bytes naming the
    protocol) and one byte naming the mode -- ``A`` AES-256-GCM, ``C``
    ChaCha20-Poly1305 (both encrypting), ``P`` authenticated only (encryption off).

    >>> greeting(b"TSMESH3", True) in (b"TSMESH3A", b"TSMESH3C")
    True
    >>> mode(greeting(b"TSMESH3", False))
    ('AES-256-GCM', False)
    """
    if not encrypt:
        return prefix + b"P"
    return prefix + (b"A" if default_cipher() == AES_GCM else b"C")


def mode(magic: bytes) -> Optional[tuple[str, bool]]:
    """``(cipher, encrypt)`` named by a greeting's last byte, or None if it names none."""
    return _MODES.get(bytes(magic[-1:]))


def derive_keys(secret: bytes, salt: bytes, label: bytes, count: int) -> list[bytes]:
    """``count`` independent 32-byte keys from HKDF-SHA256 over ``secret``, salted with
    ``salt`` (both ends' handshake nonces), for the purpose ``label``.

    >>> a = derive_keys(b"s", b"n1n2", b"x", 2)
    >>> len(a), len(a[0]), a[0] != a[1], a == derive_keys(b"s", b"n1n2", b"x", 2)
    (2, 32, True, True)
    >>> a == derive_keys(b"s", b"n1n3", b"x", 2)       # other nonces: other keys
    False
    """
    if not secret:
        raise ValueError("deriving keys needs a non-empty secret")
    material = HKDF(algorithm=hashes.SHA256(), length=KEY * count, salt=bytes(salt),
                    info=b"timely_spark " + bytes(label)).derive(bytes(secret))
    return [material[i * KEY:(i + 1) * KEY] for i in range(count)]


def _aead(key: bytes, cipher: str) -> Any:
    if cipher == AES_GCM:
        return AESGCM(key)
    if cipher == CHACHA20_POLY1305:
        return ChaCha20Poly1305(key)
    raise ValueError(f"unknown cipher {cipher!r} (known: {AES_GCM}, {CHACHA20_POLY1305})")


def buffer(n: int) -> Any:
    """A writable buffer of ``n`` bytes: a bytearray when small; when large, memory that
    is not zeroed first (numpy's ``empty``: a fresh ``bytearray`` of megabytes costs
    more to zero and fault in than sealing it takes).

    >>> len(buffer(10)), len(buffer(1 << 20))
    (10, 1048576)
    """
    if n < _STREAM_FROM:
        return bytearray(n)
    import numpy

    return memoryview(numpy.empty(n, numpy.uint8))     # type: ignore[arg-type]


def _nonce(number: int) -> bytes:
    return number.to_bytes(12, "little")


class Sealer:
    """Seals the frames of one direction of one wire, numbering them from 0.

    ``seal(header, parts)`` returns the buffers to write after the clear ``header``:
    the encrypted payload and its tag (or, with ``encrypt=False``, the payload parts in
    clear and a tag over header and payload).  Past ``limit`` frames it raises
    :class:`~timely_spark.errors.FrameLimitReached` naming ``peer``: a nonce is never
    used twice.
    """

    def __init__(self, key: bytes, cipher: str = AES_GCM, encrypt: bool = True,
                 limit: int = MAX_FRAMES_PER_KEY, peer: str = "the peer", buffer_api: bool = BUFFER_API) -> None:
        self.key = key
        self.buffer_api = buffer_api and BUFFER_API
        self.cipher = cipher
        self._aead = _aead(key, cipher)
        self.encrypt = encrypt
        self.limit = limit
        self.peer = peer
        self.frames = 0          # frames sealed so far (the next frame's number)

    def _next_nonce(self) -> bytes:
        number = self.frames
        if number >= self.limit:
            raise FrameLimitReached(
                f"the connection to {self.peer} has sealed {self.limit} frames in this direction, as many as "
                "one key may (timely_spark.communication.aead.MAX_FRAMES_PER_KEY): it closes rather than reuse a nonce")
        self.frames = number + 1
        return _nonce(number)

    def seal_bytes(self, header: bytes, data: bytes) -> bytes:
        """The sealed form of the next frame whose (small) payload is ``data``: one call,
        no buffer of ours (the common case of small messages)."""
        number = self.frames
        if number >= self.limit:
            self._next_nonce()                               # (raises)
        self.frames = number + 1
        nonce = number.to_bytes(12, "little")                # (_next_nonce inline: every small frame comes here)
        if self.encrypt:
            return self._aead.encrypt(nonce, data, header)   # type: ignore[no-any-return]
        return data + self._aead.encrypt(nonce, b"", header + data)

    def seal(self, header: bytes, parts: Sequence[Any], into: Any = None) -> list[Any]:
        """The buffers that follow ``header`` on the wire for the next frame, whose
        payload is the concatenation of ``parts`` (bytes-like).  ``into``: a writable
        buffer of at least the payload's size and :data:`TAG` that the ciphertext goes
        to (the caller reuses it once the frame is written) instead of a new one.  With
        encryption off a large payload is not copied: its parts come back as they are,
        followed by the tag."""
        nonce = self._next_nonce()
        views = [memoryview(p).cast("B") for p in parts]
        total = sum(v.nbytes for v in views)
        if not self.encrypt:
            if total >= _STREAM_FROM and self.cipher == AES_GCM:     # the tag over header and parts, no join
                mac = Cipher(algorithms.AES(self.key), modes.GCM(nonce)).encryptor()
                mac.authenticate_additional_data(bytes(header))
                for v in views:
                    mac.authenticate_additional_data(v)
                mac.finalize()
                return [*views, mac.tag]
            plain = b"".join(views)
            return [plain, self._aead.encrypt(nonce, b"", bytes(header) + plain)]
        out = buffer(total + TAG) if into is None else into[:total + TAG]
        if len(views) > 1 and total >= _STREAM_FROM and self.cipher == AES_GCM:
            enc = Cipher(algorithms.AES(self.key), modes.GCM(nonce)).encryptor()
            enc.authenticate_additional_data(bytes(header))
            view = memoryview(out)
            at = 0
            for v in views:
                if v.nbytes:
                    at += enc.update_into(v, view[at:at + v.nbytes + 15])
            enc.finalize()
            out[total:] = enc.tag
            return [out]
        data = views[0] if len(views) == 1 else b"".join(views)
        if not self.buffer_api:                          # cryptography before 45: one-shot
            return [self._aead.encrypt(nonce, bytes(data), bytes(header))]
        self._aead.encrypt_into(nonce, data, header, out)
        return [out]


class Opener:
    """Opens the frames of one direction of one wire, expecting numbers 0, 1, 2...

    ``open(header, sealed)`` (``sealed``: what followed the header, tag included)
    returns the payload, or None when the tag does not check (wrong key, altered,
    injected, replayed, reordered or dropped frames); the expected number advances only
    past frames that check.
    """

    def __init__(self, key: bytes, cipher: str = AES_GCM, encrypt: bool = True,
                 limit: int = MAX_FRAMES_PER_KEY, buffer_api: bool = BUFFER_API) -> None:
        self.key = key
        self.buffer_api = buffer_api and BUFFER_API
        self.cipher = cipher
        self._aead = _aead(key, cipher)
        self.encrypt = encrypt
        self.limit = limit
        self.frames = 0          # frames opened so far (the next frame's number)

    def open(self, header: bytes, sealed: memoryview, in_place: bool = False) -> Optional[memoryview]:
        """The payload of the next frame, or None if it fails its tag.  ``in_place``:
        ``sealed`` is writable and given to the payload (the caller neither reuses nor
        changes it): a large payload is then decrypted where it lies (or, in clear,
        checked and returned as it is) rather than copied out.  Either way, nothing of
        the payload is returned unless its tag checked."""
        number = self.frames
        if number >= self.limit or sealed.nbytes < TAG:
            return None
        nonce = number.to_bytes(12, "little")
        size = sealed.nbytes - TAG
        large = in_place and size >= _STREAM_FROM
        try:
            if self.encrypt and not self.buffer_api:
                plain = memoryview(self._aead.decrypt(nonce, bytes(sealed), bytes(header)))
            elif self.encrypt:
                out = sealed[:size] if large else bytearray(size) if size < _STREAM_FROM else buffer(size)
                self._aead.decrypt_into(nonce, sealed, header, out)
                plain = memoryview(out)
            elif large and self.cipher == AES_GCM:      # in clear: the tag over header and payload, no copy
                mac = Cipher(algorithms.AES(self.key), modes.GCM(nonce, bytes(sealed[size:]))).decryptor()
                mac.authenticate_additional_data(bytes(header))
                mac.authenticate_additional_data(sealed[:size])
                mac.finalize()
                plain = sealed[:size]
            else:                                     # in clear: a copy the caller may keep
                plain = memoryview(bytes(sealed[:-TAG]))
                self._aead.decrypt(nonce, sealed[-TAG:], bytes(header) + bytes(plain))
        except InvalidTag:
            return None
        self.frames = number + 1
        return plain
