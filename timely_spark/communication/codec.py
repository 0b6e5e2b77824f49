"""Serialization of channel payloads: pickle protocol 5, and Arrow IPC for record batches.

:func:`encode` returns a kind byte and a list of buffers to be written one after
another (no concatenation copy); :func:`decode` takes the kind and the received
bytes.  A payload ``(time, [RecordBatch, ...])`` whose batches share a schema
travels as an Arrow IPC stream; anything else is pickled with protocol 5, large
buffers out of band.

>>> kind, parts = encode((3, [(1, 2), (3, 4)]))
>>> decode(kind, memoryview(b"".join(bytes(p) for p in parts)))
(3, [(1, 2), (3, 4)])
>>> import pyarrow as pa
>>> rb = pa.record_batch({"x": [1, 2, 3]})
>>> kind, parts = encode((7, [rb, rb]))
>>> kind == ARROW
True
>>> t, batches = decode(kind, memoryview(b"".join(bytes(p) for p in parts)))
>>> t, [b.num_rows for b in batches], batches[0].equals(rb)
(7, [3, 3], True)
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

__all__ = ["encode", "pickled_parts", "decode", "PICKLE", "ARROW", "IN_BAND"]

PICKLE = 1
ARROW = 2

_COUNT = struct.Struct("<I")
_LEN = struct.Struct("<Q")
IN_BAND = _COUNT.pack(0)      # the head of a pickle with no buffers out of band (``encode``'s first part then)


def _arrow_batches(payload: Any) -> Any:
    """The record batches of a ``(time, [RecordBatch, ...])`` payload, or None."""
    if type(payload) is not tuple or len(payload) != 2:
        return None
    data = payload[1]
    if type(data) is not list or not data:
        return None
    first = data[0]
    if type(first).__name__ != "RecordBatch" or type(first).__module__.split(".")[0] != "pyarrow":
        return None
    schema = first.schema
    for rb in data:
        if type(rb) is not type(first) or not rb.schema.equals(schema):
            return None
    return data


def _pad(time_length: int) -> int:
    """Zero bytes after the pickled time, so that the Arrow stream starts 8-byte aligned
    in the frame (Arrow's buffers then stay aligned for compute kernels and Acero)."""
    return -(_LEN.size + time_length) % 8


class _Pieces:
    """A write-only file that keeps what Arrow's IPC writer hands it, in order: the
    metadata as small bytes, the columns' buffers as they are (no copy).  The stream is
    then the concatenation of ``parts``; sealing a frame reads them once (see
    :mod:`.aead`), so a batch's bytes are not copied into a stream buffer first."""

    __slots__ = ("parts", "closed")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def encode(payload: Any) -> tuple[int, list[Any]]:
    """A payload as ``(kind, buffers)`` for one framed write: Arrow IPC for record batches, pickle protocol 5 with out-
    of-band buffers otherwise.  The buffers may be the payload's own memory (Arrow
    column buffers, pickle's out-of-band buffers): write or copy them before the payload
    could change.
    """
    batches = _arrow_batches(payload) if type(payload) is tuple else None   # (a progress batch is a list)
    if batches is not None:
        import pyarrow as pa

        pieces = _Pieces()
        with pa.ipc.new_stream(pa.PythonFile(pieces, mode="w"), batches[0].schema) as writer:
            for rb in batches:
                writer.write_batch(rb)
        time = pickle.dumps(payload[0], protocol=5)
        return ARROW, [_LEN.pack(len(time)), time, bytes(_pad(len(time))), *pieces.parts]
    buffers: list[pickle.PickleBuffer] = []
    main = pickle.dumps(payload, protocol=5, buffer_callback=buffers.append)
    return PICKLE, pickled_parts(main, buffers)


def pickled_parts(main: bytes, buffers: list) -> list[Any]:
    """The buffers :func:`encode` writes for a payload already pickled (protocol 5):
    ``main`` and the out-of-band ``buffers`` its ``buffer_callback`` was given (a caller
    that pickled to see the size need not pickle again)."""
    if not buffers:
        return [IN_BAND, main]
    raws = [b.raw() for b in buffers]
    head = _COUNT.pack(len(raws)) + _LEN.pack(len(main)) + b"".join(_LEN.pack(r.nbytes) for r in raws)
    return [head, main, *raws]


def decode(kind: int, body: memoryview) -> Any:
    """The payload back from its kind and bytes (the inverse of :func:`encode`)."""
    if kind == ARROW:
        import pyarrow as pa

        (n,) = _LEN.unpack_from(body, 0)
        time = pickle.loads(body[8:8 + n])
        reader = pa.ipc.open_stream(pa.py_buffer(body[8 + n + _pad(n):]))
        return time, list(reader)
    if kind != PICKLE:
        raise ValueError(f"unknown payload kind {kind}")
    (count,) = _COUNT.unpack_from(body, 0)
    if count == 0:
        return pickle.loads(body[4:])
    offset = 4
    (main_len,) = _LEN.unpack_from(body, offset)
    offset += 8
    lengths = []
    for _ in range(count):
        (n,) = _LEN.unpack_from(body, offset)
        lengths.append(n)
        offset += 8
    main = body[offset:offset + main_len]
    offset += main_len
    buffers = []
    for n in lengths:
        buffers.append(body[offset:offset + n])
        offset += n
    return pickle.loads(main, buffers=buffers)
