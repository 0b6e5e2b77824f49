"""A worker's vertex ids as dense positions, the index of its per-vertex arrays.

The incremental components operators keep per-vertex state in numpy arrays indexed by
a dense position ``0..n-1`` a worker gives each vertex id it sees, in order of first
sight (a :class:`~..key_index.KeyIndex` from id to position, an array back).
"""

from __future__ import annotations

import numpy as np

from ...errors import GraphInputError
from ..compact import compact_ids
from ..key_index import KeyIndex

__all__ = ["DenseIds", "MAX_VERTICES"]

#: Dense ids are packed two to an int64 key, so one worker's dense space holds fewer.
MAX_VERTICES = 1 << 31


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
    """

    def __init__(self, operator: str) -> None:
        self.operator = operator
        self.index = KeyIndex()
        self.vid = np.zeros(0, np.int64)          # by position; its length is the capacity
        self.n = 0

    def __len__(self) -> int:
        return len(self.index)

    def get(self, ids: np.ndarray, default: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, found)`` of ``ids`` (``default`` where not found)."""
        return self.index.get(ids, default)

    def dense(self, ids: np.ndarray) -> np.ndarray:
        """The positions of ``ids``, new ids given the next ones (``vid`` grows by doubling)."""
        uniq, inverse = compact_ids(ids)                    # no sort when the ids are dense
        dense, found = self.index.get(uniq, -1)
        fresh = uniq[~found]
        if len(fresh):
            start, self.n = self.n, self.n + len(fresh)
            if self.n > MAX_VERTICES:
                raise GraphInputError(f"{self.operator}: more than {MAX_VERTICES} distinct vertices on one worker",
                                      "src")
            if self.n > len(self.vid):
                cap = max(self.n, 2 * len(self.vid), 1024)
                self.vid = np.concatenate([self.vid, np.zeros(cap - len(self.vid), np.int64)])
            new = np.arange(start, self.n, dtype=np.int64)
            self.index.set(fresh, new)
            self.vid[new] = fresh
            dense[~found] = new
        return dense[inverse.reshape(-1)]
