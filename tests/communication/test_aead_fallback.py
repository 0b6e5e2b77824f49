"""Sealing and opening without cryptography's ``encrypt_into``/``decrypt_into`` (releases
before 45, which pyproject.toml still allows): frames round-trip exactly, interoperate with
frames of the buffer path (two processes may run different releases), and a tampered frame
is refused."""

import numpy as np
import pytest

from timely_spark.communication import aead

KEY = bytes(range(32))
HEADER = b"\x10\x00\x00\x00\x00\x00\x00\x00"


def _payloads():
    rng = np.random.default_rng(1)
    big = rng.bytes(3 << 20)                               # a large frame (opened in place)
    return [[b"small"], [big], [big[:1000], big[1000:]], [big[:10], big[10:200_000]]]


def _seal_open(seal_into: bool, open_into: bool, tamper: bool = False) -> list:
    sealer, opener = aead.Sealer(KEY, buffer_api=seal_into), aead.Opener(KEY, buffer_api=open_into)
    out = []
    for parts in _payloads():
        sealed = bytearray(b"".join(bytes(memoryview(p).cast("B")) for p in sealer.seal(HEADER, parts)))
        if tamper:
            sealed[len(sealed) // 2] ^= 1
        plain = opener.open(HEADER, memoryview(sealed), in_place=True)
        out.append(None if plain is None else bytes(plain))
        if plain is None:
            break
    return out


@pytest.mark.parametrize("seal_into,open_into", [(False, False), (False, True), (True, False)])
def test_frames_round_trip_exactly_without_the_buffer_api(seal_into, open_into):
    expected = [b"".join(parts) for parts in _payloads()]
    assert _seal_open(seal_into, open_into) == expected


def test_a_tampered_frame_is_refused_without_the_buffer_api():
    assert _seal_open(False, False, tamper=True) == [None]
