"""A vectorized, stable hash of key columns: the same row hashes alike in every process
and on every machine.

Integers (and booleans, dates, times, timestamps, durations: their integer values)
go through the splitmix64 finalizer; strings and binaries are hashed from their
bytes (a polynomial over the bytes of each value, computed for the whole column
with numpy, then finalized the same way); a dictionary column is hashed by its
values.  A null hashes to 0 in its column.  Several key columns combine their
hashes in order.  Python runs a fixed number of numpy calls per column, whatever
the number of rows.

Cost: a few passes over the key column's bytes; about 100 M int64 keys/s, and
strings at a few hundred MB/s, on one core.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["hash_columns", "hash_array", "destinations"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_P = np.uint64(0x100000001B3)          # FNV's prime, as the polynomial's base
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise on uint64 (wrapping arithmetic)."""
    x = x + _GOLDEN                        # a new array: the rest works in place
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _powers(n: int) -> np.ndarray:
    """``_P ** k`` modulo 2**64 for k in 0..n-1."""
    out = np.empty(max(n, 1), dtype=np.uint64)
    out[0] = 1
    if n > 1:
        out[1:] = _P
        np.multiply.accumulate(out, out=out)
    return out[:n]


def _hash_binary(arr: pa.Array) -> np.ndarray:
    """Polynomial hash of each value's bytes (length mixed in), for a string or binary array."""
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        offset_type = np.int64
    else:
        offset_type = np.int32
    buffers = arr.buffers()
    n = len(arr)
    width = np.dtype(offset_type).itemsize
    offsets = np.frombuffer(buffers[1], dtype=offset_type, count=n + 1, offset=arr.offset * width)
    offsets = offsets.astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    if buffers[2] is not None and end > start:
        data = np.frombuffer(buffers[2], dtype=np.uint8)[start:end]
    else:
        data = np.zeros(0, dtype=np.uint8)
    lengths = np.diff(offsets)
    total = end - start
    h = lengths.astype(np.uint64) * _GOLDEN
    if total:
        row = np.repeat(np.arange(n), lengths)
        exponent = (offsets[1:][row] - start) - 1 - np.arange(total)     # distance from the value's end
        contrib = data.astype(np.uint64) * _powers(int(lengths.max()))[exponent]
        nonempty = lengths > 0
        starts = (offsets[:-1] - start)[nonempty]
        sums = np.add.reduceat(contrib, starts)
        h[nonempty] += sums
    return _mix(h)


def hash_array(arr: Any) -> np.ndarray:
    """A uint64 hash per element of a pyarrow array (or chunked array); nulls hash to 0.

    >>> import pyarrow as pa
    >>> h = hash_array(pa.array(["a", "b", None, "a"]))
    >>> bool(h[0] == h[3]), bool(h[0] != h[1]), int(h[2])
    (True, True, 0)
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        h = _hash_binary(arr)
    elif pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_temporal(t):
        if pa.types.is_temporal(t) or pa.types.is_uint64(t):     # uint64: the same bits as int64, all of them
            arr = arr.view(pa.int64() if t.bit_width == 64 else pa.int32())
        values = arr.cast(pa.int64()) if not pa.types.is_int64(arr.type) else arr
        if values.null_count:
            values = values.fill_null(0)
        h = _mix(values.to_numpy(zero_copy_only=False).view(np.uint64))
    elif pa.types.is_floating(t):
        floats = pc.add(arr.cast(pa.float64()), 0.0).fill_null(0.0)      # -0.0 + 0.0 == 0.0
        h = _mix(floats.to_numpy(zero_copy_only=False).view(np.uint64))
    else:
        raise TypeError(f"cannot hash key values of type {t} (integers, strings, binaries, dates and "
                        "timestamps can be keys)")
    if arr.null_count:
        h = np.where(arr.is_null().to_numpy(zero_copy_only=False), np.uint64(0), h)
    return h


def hash_columns(batch: Any, keys: Sequence[str]) -> np.ndarray:
    """A uint64 hash per row of ``batch`` (a RecordBatch or Table) over the ``keys`` columns.

    >>> import pyarrow as pa
    >>> rb = pa.record_batch({"k": [1, 2, 1], "s": ["x", "y", "x"]})
    >>> h = hash_columns(rb, ["k", "s"])
    >>> bool(h[0] == h[2]), bool(h[0] != h[1])
    (True, True)
    """
    h = hash_array(batch.column(keys[0]))
    for key in keys[1:]:
        h = _mix(h * _P + hash_array(batch.column(key)))
    return h


def destinations(batch: Any, keys: Sequence[str], peers: int) -> np.ndarray:
    """The worker of each row of ``batch``: ``hash % peers`` (the rule a snapshot's keyed
    state is re-sharded by, so a key's state and its rows meet on any number of workers);
    as the smallest unsigned type that holds it (sorting it is then a radix sort).

    >>> import pyarrow as pa
    >>> destinations(pa.record_batch({"k": [5, 5, 9]}), ["k"], 1).tolist()
    [0, 0, 0]
    """
    h = hash_columns(batch, keys)
    if peers & (peers - 1):
        h %= np.uint64(peers)
    else:                                  # a power of two: the same as % and faster
        h &= np.uint64(peers - 1)
    return h.astype(np.uint8 if peers <= 256 else np.uint16 if peers <= 65536 else np.uint32)
