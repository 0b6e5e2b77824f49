"""Distinct int64 ids and per-id minima, vectorized, without a sort when the ids are dense.

Graph ids are often dense (``0..n-1``, or the dense ids of :mod:`.ids.dense`): when the
values span a range no larger than :data:`DIRECT_SPAN` times their number, a table of
the range's size replaces the sort (``O(n + range)``, several times faster than sorting
a million ids); otherwise both functions sort (``O(n log n)``).  Both give the same
results either way.
"""

from __future__ import annotations

import numpy as np

from .unique import sorted_unique

__all__ = ["compact_ids", "group_min", "DIRECT_SPAN", "distinct_ids", "direct_span", "offsets"]

#: Use an addressing table (no sort) when ``max - min < DIRECT_SPAN * len + 1024``.
DIRECT_SPAN = 4


def _span(values: np.ndarray) -> tuple[int, int]:
    lo, hi = int(values.min()), int(values.max())
    return lo, hi - lo + 1


def direct_span(values: np.ndarray) -> tuple[int, int]:
    """``(lowest, span)`` of non-empty ``values`` if they are dense enough for an
    addressing table (span at most ``DIRECT_SPAN * len + 1024``), else ``(lowest, 0)``.

    >>> direct_span(np.array([5, 9, 7])), direct_span(np.array([0, 10**9]))
    ((5, 5), (0, 0))
    """
    lo, span = _span(values)
    return lo, (span if span <= DIRECT_SPAN * len(values) + 1024 else 0)


def offsets(values: np.ndarray, lo: int, span: int) -> np.ndarray:
    """``values - lo`` as int32 if ``span`` allows (half the memory of int64), else int64.

    >>> offsets(np.array([5, 9]), 5, 5).dtype.name
    'int32'
    """
    kind = np.int32 if span < 2**31 else np.int64
    # in int32, both sides wrap modulo 2**32 and so does their difference, which fits
    return np.subtract(values, np.int64(lo), dtype=kind, casting="unsafe")


def distinct_ids(values: np.ndarray) -> np.ndarray:
    """The distinct ``values`` ascending (int64): ``compact_ids(values)[0]`` without the inverse.

    >>> distinct_ids(np.array([7, 3, 7, 5])).tolist()
    [3, 5, 7]
    """
    if not len(values):
        return values.astype(np.int64)
    lo, span = direct_span(values)
    if not span:
        return sorted_unique(values).astype(np.int64, copy=False)     # np.unique: a 50x slower hash path
    present = np.zeros(span, bool)
    present[offsets(values, lo, span)] = True
    out = np.flatnonzero(present)
    out += lo
    return out


def compact_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct, inverse)``: the distinct ``values`` ascending and, per value, its
    position among them (what ``np.unique(values, return_inverse=True)`` returns, as int64).

    >>> d, i = compact_ids(np.array([7, 3, 7, 5]))
    >>> d.tolist(), i.tolist()
    ([3, 5, 7], [2, 0, 2, 1])
    """
    if not len(values):
        return values.astype(np.int64), np.zeros(0, np.int64)
    lo, span = _span(values)
    if span > DIRECT_SPAN * len(values) + 1024:
        bits = len(values).bit_length()
        if values.dtype == np.int64 and span.bit_length() + bits <= 63:
            return _packed_ids(values, lo, bits)
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1).astype(np.int64, copy=False)
    offset = values - lo
    present = np.zeros(span, bool)
    present[offset] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present) + lo, rank[offset]


def _packed_ids(values: np.ndarray, lo: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`compact_ids` of sparse int64 ``values`` by one sort of ``(value - lo) << bits |
    position`` (it fits an int64): a plain sort, several times faster than the indirect one
    of ``np.unique`` (a few thousand ids: 85 -> 35 us).

    >>> d, i = _packed_ids(np.array([70, -3, 70]), -3, 2)
    >>> d.tolist(), i.tolist()
    ([-3, 70], [1, 0, 1])
    """
    n = len(values)
    packed = np.sort(((values - lo) << bits) | np.arange(n, dtype=np.int64))
    ordered = packed >> bits
    first = np.empty(n, bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(n, np.int64)
    inverse[packed & ((1 << bits) - 1)] = np.cumsum(first) - 1
    return ordered[first] + lo, inverse


def group_min(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(distinct keys ascending, the smallest value of each, number of rows of each,
    per row the position of its key among the distinct keys)``.

    >>> k, m, c, at = group_min(np.array([9, 4, 9, 4, 1]), np.array([5, 2, 3, 8, 1]))
    >>> k.tolist(), m.tolist(), c.tolist(), at.tolist()
    ([1, 4, 9], [1, 2, 3], [1, 2, 2], [2, 1, 2, 1, 0])
    """
    if not len(keys):
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    lo, span = _span(keys)
    if span > DIRECT_SPAN * len(keys) + 1024:
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        first = np.empty(len(ordered), bool)
        first[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        at = np.empty(len(keys), np.int64)
        at[order] = np.cumsum(first) - 1
        counts = np.diff(np.append(starts, len(keys)))
        return ordered[starts], np.minimum.reduceat(values[order], starts), counts, at
    offset = keys - lo
    count = np.bincount(offset, minlength=span)
    present = count > 0
    rank = np.cumsum(present, dtype=np.int64) - 1
    smallest = np.full(span, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(smallest, offset, values)
    where = np.flatnonzero(present)
    return where + lo, smallest[where], count[where], rank[offset]
