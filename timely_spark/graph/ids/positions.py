"""A worker's vertex ids as dense positions, the index of its per-vertex arrays.

The incremental components operators keep per-vertex state in numpy arrays indexed by
a dense position ``0..n-1`` a worker gives each vertex id it sees, in order of first
sight (a :class:`~..key_index.KeyIndex` from id to position, an array back).

While every id seen is a non-negative integer below :data:`DIRECT_PER_ID` times the ids
held (or below :data:`DIRECT_BELOW`), the positions are kept in an array indexed by the id
itself: a lookup is one read, where a binary search in a large sorted level makes a chain
of reads that each miss the cache.  The first id outside that range turns the map into the
:class:`~..key_index.KeyIndex` for good (the positions stay the same).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import GraphInputError
from ..compact import compact_ids
from ..key_index import KeyIndex

__all__ = ["DenseIds", "MAX_VERTICES", "DIRECT_BELOW", "DIRECT_PER_ID"]

#: Dense ids are packed two to an int64 key, so one worker's dense space holds fewer.
MAX_VERTICES = 1 << 31
#: Ids below this (non-negative) are always looked up in the direct array ...
DIRECT_BELOW = 1 << 20
#: ... and ids below this many times the ids held (its memory: 4 bytes per slot).
DIRECT_PER_ID = 4


class DenseIds:
    """A worker's vertex ids as dense positions ``0..n-1`` (in order of first sight), and
    back (``vid[position]``): what the incremental graph operators index their arrays
    by.  Positions are never reused; an operator compacts by starting a new map.  More
    than :data:`MAX_VERTICES` ids raise :class:`~timely_spark.errors.GraphInputError`
    naming ``operator``.

    >>> ids = DenseIds("Components")
    >>> ids.dense(np.array([50, 7, 50])).tolist(), ids.dense(np.array([9, 7])).tolist()
    ([1, 0, 1], [2, 0])
    >>> ids.vid[:ids.n].tolist(), ids.get(np.array([9, 8]), -1)[0].tolist()
    ([7, 50, 9], [2, -1])
    >>> ids.dense(np.array([-4, 9])).tolist(), ids.direct is None     # a negative id: the KeyIndex
    ([3, 2], True)
    """

    def __init__(self, operator: str) -> None:
        self.operator = operator
        self.index = KeyIndex()                   # id -> position, once ``direct`` is given up
        self.direct: Optional[np.ndarray] = np.zeros(0, np.int32)   # id -> position (-1: none), while ids are small
        self.vid = np.zeros(0, np.int64)          # by position; its length is the capacity
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def _direct(self, ids: np.ndarray) -> Optional[np.ndarray]:
        """The direct array, grown to cover ``ids``; None (the KeyIndex from now on) if they
        do not fit it."""
        direct = self.direct
        if direct is None or not len(ids):
            return direct
        lo, hi = int(ids.min()), int(ids.max())
        if hi < len(direct) and lo >= 0:
            return direct
        limit = max(DIRECT_BELOW, DIRECT_PER_ID * (self.n + len(ids)))
        if lo < 0 or hi >= limit:
            self.index.set(self.vid[:self.n], np.arange(self.n, dtype=np.int64))
            self.direct = None
            return None
        grown = np.full(min(max(2 * len(direct), hi + 1, 1024), limit), -1, np.int32)
        grown[:len(direct)] = direct
        self.direct = grown
        return grown

    def in_use(self, *positions: np.ndarray) -> int:
        """How many distinct positions ``positions`` hold (the ids an operator's state still
        refers to): what tells it whether a rebuild on a new map would pay.

        >>> ids = DenseIds("Components")
        >>> _ = ids.dense(np.array([4, 5, 6, 7]))
        >>> ids.in_use(np.array([0, 2]), np.array([2]))
        2
        """
        used = np.zeros(self.n, bool)
        for at in positions:
            used[at] = True
        return int(np.count_nonzero(used))

    def get(self, ids: np.ndarray, default: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, found)`` of ``ids`` (``default`` where not found)."""
        direct = self.direct
        if direct is None:
            return self.index.get(ids, default)
        inside = (ids >= 0) & (ids < len(direct))
        at = np.full(len(ids), -1, np.int64)
        at[inside] = direct[ids[inside]]
        found = at >= 0
        at[~found] = default
        return at, found

    def _add(self, fresh: np.ndarray) -> np.ndarray:
        """Positions for the new distinct ids ``fresh`` (``vid`` grows by doubling)."""
        start, self.n = self.n, self.n + len(fresh)
        if self.n > MAX_VERTICES:
            raise GraphInputError(f"{self.operator}: more than {MAX_VERTICES} distinct vertices on one worker",
                                  "src")
        if self.n > len(self.vid):
            cap = max(self.n, 2 * len(self.vid), 1024)
            self.vid = np.concatenate([self.vid, np.zeros(cap - len(self.vid), np.int64)])
        new = np.arange(start, self.n, dtype=np.int64)
        self.vid[new] = fresh
        return new

    def dense(self, ids: np.ndarray) -> np.ndarray:
        """The positions of ``ids``, new ids given the next ones (in ascending id order)."""
        direct = self._direct(ids)
        if direct is not None:
            at = direct[ids].astype(np.int64)
            fresh = at < 0
            if fresh.any():
                new_ids = compact_ids(ids[fresh])[0]
                direct[new_ids] = self._add(new_ids)
                at[fresh] = direct[ids[fresh]]
            return at
        uniq, inverse = compact_ids(ids)                    # no sort when the ids are dense
        dense, found = self.index.get(uniq, -1)
        fresh_ids = uniq[~found]
        if len(fresh_ids):
            new = self._add(fresh_ids)
            self.index.set(fresh_ids, new)
            dense[~found] = new
        return dense[inverse.reshape(-1)]
