"""A multiset of rows kept sorted, for the incremental graph algorithms' worker state.

:class:`SortedRows` holds rows of a few key columns (e.g. ``(src, dst, weight)`` of
the edges a worker owns) with an int64 count each, in lexicographic order: a batch of
changes finds its rows by a vectorized binary search (``O(b log n)`` for ``b`` rows),
and the rows of given first-column values (a vertex's out-edges) by ``searchsorted``.
A row whose count drops to zero stays as a tombstone until :meth:`compact`, so
positions found during one update stay valid.  Inserting new rows copies the arrays
(``np.insert``: a memory copy, no Python per row).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .key_index import expand_ranges

__all__ = ["SortedRows", "consolidate_rows"]


def consolidate_rows(keys: Sequence[np.ndarray], diff: np.ndarray) -> tuple[list, np.ndarray]:
    """Equal rows of ``keys`` merged (their ``diff`` summed), zero sums dropped, in
    lexicographic order.

    >>> k, d = consolidate_rows([np.array([2, 1, 2]), np.array([5, 0, 5])], np.array([1, 1, -1]))
    >>> [c.tolist() for c in k], d.tolist()
    ([[1], [0]], [1])
    """
    if not len(diff):
        return [np.asarray(c) for c in keys], np.zeros(0, np.int64)
    order = np.lexsort(tuple(reversed(keys)))
    sorted_keys = [c[order] for c in keys]
    first = np.zeros(len(order), bool)
    first[0] = True
    for c in sorted_keys:
        first[1:] |= c[1:] != c[:-1]
    starts = np.flatnonzero(first)
    sums = np.add.reduceat(diff[order], starts)
    keep = sums != 0
    return [c[starts][keep] for c in sorted_keys], sums[keep]


class SortedRows:
    """Rows of ``len(dtypes)`` key columns with int64 counts, sorted lexicographically.

    >>> rows = SortedRows([np.int64, np.int64])
    >>> keys, old, new = rows.add([np.array([1, 1]), np.array([2, 3])], np.array([1, 2]))
    >>> old.tolist(), new.tolist(), rows.count.tolist()
    ([0, 0], [1, 2], [1, 2])
    >>> rows.rows_of(np.array([1]))[1].tolist()
    [0, 1]
    """

    def __init__(self, dtypes: Sequence[type]) -> None:
        self.cols: list[np.ndarray] = [np.zeros(0, dt) for dt in dtypes]
        self.count = np.zeros(0, np.int64)
        self.emptied = 0                  # rows whose count went to 0 since the last compaction (a bound)

    def __len__(self) -> int:
        return len(self.count)

    def find(self, keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, found)``: where each key row is (or would be inserted)."""
        first = self.cols[0]
        lo = np.searchsorted(first, keys[0], "left")
        hi = np.searchsorted(first, keys[0], "right")
        if len(self.cols) > 1:
            active = np.flatnonzero(lo < hi)
            while len(active):                          # lower bound on the other columns
                mid = (lo[active] + hi[active]) // 2
                less = np.zeros(len(active), bool)
                equal = np.ones(len(active), bool)
                for col, key in zip(self.cols[1:], keys[1:]):
                    a, b = col[mid], key[active]
                    less |= equal & (a < b)
                    equal &= a == b
                lo[active[less]] = mid[less] + 1
                hi[active[~less]] = mid[~less]
                active = active[lo[active] < hi[active]]
        found = lo < len(self.count)
        ok = np.flatnonzero(found)
        for col, key in zip(self.cols, keys):
            found[ok] &= col[lo[ok]] == key[ok]
        return lo, found

    def add(self, keys: Sequence[np.ndarray], diff: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
        """Apply ``diff`` to the rows ``keys``: ``(distinct changed keys, old counts,
        new counts)``, in key order.  Nothing changes if a count would go negative:
        the caller checks ``new < 0`` first via :meth:`preview`."""
        ukeys, udiff, pos, found, old = self.preview(keys, diff)
        new = old + udiff
        if (new < 0).any():
            return ukeys, old, new
        self.count[pos[found]] = new[found]
        self.emptied += int(np.count_nonzero(new == 0))
        fresh = ~found
        if fresh.any():
            at = pos[fresh]
            self.cols = [np.insert(c, at, k[fresh]) for c, k in zip(self.cols, ukeys)]
            self.count = np.insert(self.count, at, new[fresh])
        return ukeys, old, new

    def preview(self, keys: Sequence[np.ndarray], diff: np.ndarray) -> tuple:
        """``(distinct keys, summed diffs, positions, found, old counts)`` of a change."""
        ukeys, udiff = consolidate_rows(keys, diff)
        pos, found = self.find(ukeys)
        old = np.zeros(len(udiff), np.int64)
        old[found] = self.count[pos[found]]
        return ukeys, udiff, pos, found, old

    def rows_of(self, first: np.ndarray, live: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(which, rows)``: the rows whose first column is ``first[which]``
        (ascending; tombstones too unless ``live``)."""
        lo = np.searchsorted(self.cols[0], first, "left")
        hi = np.searchsorted(self.cols[0], first, "right")
        which = np.repeat(np.arange(len(first)), hi - lo)
        rows = expand_ranges(lo, hi)
        if live:
            keep = self.count[rows] > 0
            which, rows = which[keep], rows[keep]
        return which, rows

    def compact(self) -> None:
        """Drop the tombstones (rows with count 0) when they may be a quarter of the
        rows (counted as they appear, so a compaction that is not due costs nothing)."""
        if self.emptied * 4 <= len(self.count):
            return
        self.emptied = 0
        dead = self.count == 0
        if dead.sum() * 4 > len(self.count):
            keep = ~dead
            self.cols = [c[keep] for c in self.cols]
            self.count = self.count[keep]
