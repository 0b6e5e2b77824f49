"""A sorted index of int64 keys with int64 values that takes batches of updates:
the state of the incremental graph operators (:mod:`.incremental_components`).

It is a log-structured merge of sorted levels: each :meth:`KeyIndex.set` of new keys
adds a sorted level, and the two newest levels merge while the newer one is at least
half the size of the older (so there are O(log n) levels and each key is merged
O(log n) times, amortized).  A key lives in exactly one level; updating a key found
in a level writes its value in place.  Lookups and range scans are ``searchsorted``
over the levels: a batch of k keys costs O(k log n), never a scan of the index.
A value equal to ``empty`` (if given) marks a key as absent, and merges drop it; each
level counts its empty keys, so a set of keys the caller knows hold no other value (an
edge that appeared) searches only the levels that have some (none, in a graph that only
grew since their last merge).

Keys that pack two non-negative 31-bit ids, ``(a << 32) | b``, are scanned by their
*prefix* ``a`` (:meth:`KeyIndex.with_prefix`: the edges of a vertex, the members of a
label).  A level of :data:`STARTS_AT` keys or more keeps where each prefix's keys begin
(an array over the prefixes, built at its first scan, dropped when it merges), so a scan
reads two positions per prefix there instead of two binary searches in a large array,
whose dependent reads miss the cache one after the other.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..dataflow.operators.arrangement import ranges

__all__ = ["KeyIndex", "expand_ranges", "STARTS_AT"]

SHIFT = np.int64(32)
#: A level with at least this many keys keeps its prefixes' starts (see the module docstring), if
#: its largest prefix is under four times its keys (memory in proportion to the level).
STARTS_AT = 1 << 15


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(lo[i], hi[i])`` over ``i``, vectorized (the core's
    :func:`~timely_spark.dataflow.operators.arrangement.ranges` by bounds).

    >>> expand_ranges(np.array([0, 5, 7]), np.array([2, 5, 9])).tolist()
    [0, 1, 7, 8]
    """
    return ranges(lo, hi - lo)


class KeyIndex:
    """int64 keys -> int64 values, sorted levels (see the module docstring).

    >>> index = KeyIndex(empty=0)
    >>> index.set(np.array([5, 1]), np.array([50, 10]))
    >>> index.set(np.array([1, 9]), np.array([0, 90]))       # 1 becomes absent
    >>> values, found = index.get(np.array([1, 5, 7, 9]))
    >>> values.tolist(), found.tolist()
    ([0, 50, 0, 90], [False, True, False, True])
    >>> index.set(np.array([(2 << 32) | 7, (2 << 32) | 3, (3 << 32) | 1]), np.array([1, 1, 1]))
    >>> (index.with_prefix(np.array([2, 4])) & 0xFFFFFFFF).tolist()
    [3, 7]
    """

    def __init__(self, empty: Optional[int] = None) -> None:
        self.empty = empty
        self.keys: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.starts: list[Optional[np.ndarray]] = []      # per level: its prefixes' starts, once built
        self.holes: list[int] = []                        # per level: its keys holding ``empty``

    def __len__(self) -> int:
        return sum(len(k) for k in self.keys)

    def present(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, values)`` of every present key (levels in turn, each sorted).

        >>> index = KeyIndex(empty=0)
        >>> index.set(np.array([3, 1]), np.array([30, 10]))
        >>> index.set(np.array([3]), np.array([0]))             # absent, though still in its level
        >>> len(index), [a.tolist() for a in index.present()]
        (2, [[1], [10]])
        """
        keys = np.concatenate([np.zeros(0, np.int64), *self.keys])
        values = np.concatenate([np.zeros(0, np.int64), *self.values])
        if self.empty is None:
            return keys, values
        held = values != self.empty
        return keys[held], values[held]

    def _locate(self, keys: np.ndarray, holes: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Per key: the level holding it (-1: none) and its position there; ``holes``: only in
        the levels that hold ``empty`` keys (the keys are known not to hold another value)."""
        level = np.full(len(keys), -1, np.int64)
        pos = np.zeros(len(keys), np.int64)
        if not len(keys):                                    # (a round's empty lookups: no call per level)
            return level, pos
        if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
            order = np.argsort(keys)                         # sorted needles search much faster
            level_sorted, pos_sorted = self._locate(keys[order], holes)
            level[order], pos[order] = level_sorted, pos_sorted
            return level, pos
        for i, held in enumerate(self.keys):
            if not len(held) or (holes and not self.holes[i]):
                continue
            starts = self._starts(i) if len(keys) and keys[0] >= 0 else None
            if starts is not None and self._locate_by_prefix(keys, held, starts, i, level, pos):
                continue
            at = np.minimum(np.searchsorted(held, keys), len(held) - 1)
            hit = (held[at] == keys) & (level < 0)
            level[hit] = i
            pos[hit] = at[hit]
        return level, pos

    @staticmethod
    def _locate_by_prefix(keys: np.ndarray, held: np.ndarray, starts: np.ndarray, i: int, level: np.ndarray,
                          pos: np.ndarray) -> bool:
        """Find the non-negative ``keys`` in level ``i`` among the keys of their prefixes (read
        from its starts), if those are few (at most 8 per key: not a hub's); False if not."""
        prefix = keys >> SHIFT
        p = np.minimum(prefix, len(starts) - 2)
        first, end = starts[p], starts[p + 1]
        end[prefix > p] = first[prefix > p]                 # past the largest prefix: none
        span = end - first
        if int(span.sum()) > 8 * len(keys):
            return False
        at = expand_ranges(first, end)
        owner = np.repeat(np.arange(len(keys)), span)
        hit = held[at] == keys[owner]
        owner, at = owner[hit], at[hit]
        new = level[owner] < 0
        level[owner[new]] = i
        pos[owner[new]] = at[new]
        return True

    def get(self, keys: np.ndarray, default: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(values, found)`` for ``keys`` (``default`` where not found or empty)."""
        return self._values(*self._locate(keys), default)

    def _values(self, level: np.ndarray, pos: np.ndarray, default: int) -> tuple[np.ndarray, np.ndarray]:
        values = np.full(len(level), default, np.int64)
        found = level >= 0
        if found.any():                                      # (a loop over the levels only for keys held)
            for i, held in enumerate(self.values):
                hit = level == i
                if hit.any():
                    values[hit] = held[pos[hit]]
        if self.empty is not None:
            found &= values != self.empty
            values[~found] = default
        return values, found

    def add(self, keys: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """Add ``deltas`` to the values of ``keys`` (distinct; absent ones count 0) and
        return the old values: :meth:`get` and :meth:`set` with one search of the levels.

        >>> index = KeyIndex(empty=0)
        >>> index.add(np.array([4, 2]), np.array([1, 1])).tolist(), index.add(np.array([4]), np.array([-1])).tolist()
        ([0, 0], [1])
        >>> index.get(np.array([2, 4]))[1].tolist()
        [True, False]
        """
        return self.add_peek(keys, deltas, np.zeros(0, np.int64))[0]

    def add_peek(self, keys: np.ndarray, deltas: np.ndarray, peek: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`add`, and the values of the keys ``peek`` before it (0 where absent): one
        search of the levels for both.

        >>> index = KeyIndex(empty=0)
        >>> _ = index.add(np.array([4]), np.array([2]))
        >>> [a.tolist() for a in index.add_peek(np.array([4, 2]), np.array([1, 1]), np.array([2, 4, 6]))]
        [[2, 0], [0, 2, 0]]
        """
        keys = np.asarray(keys, np.int64)
        level, pos = self._locate(np.concatenate([keys, np.asarray(peek, np.int64)]))
        values = self._values(level, pos, 0)[0]
        n = len(keys)
        old = values[:n]
        self._write(keys, old + np.asarray(deltas, np.int64), level[:n], pos[:n])
        return old, values[n:]

    def set(self, keys: np.ndarray, values: np.ndarray, new: bool = False) -> None:
        """Set ``keys`` (distinct) to ``values``: in place where held, a new level for the rest.
        ``new``: the caller knows no key holds a value but ``empty`` (absent, or made empty):
        only the levels holding empty keys are searched (none, until a value is made empty).

        >>> index = KeyIndex(empty=0)
        >>> index.set(np.array([1, 3, 5, 7]), np.array([1, 1, 1, 1]))
        >>> index.set(np.array([5]), np.array([0]))                  # 5 empty in its level
        >>> index.set(np.array([5, 8]), np.array([2, 2]), new=True)  # found there, written in place
        >>> [k.tolist() for k in index.keys], index.get(np.array([3, 5, 8]))[0].tolist()
        ([[1, 3, 5, 7], [8]], [1, 2, 2])
        """
        keys, values = np.asarray(keys, np.int64), np.asarray(values, np.int64)
        if not len(keys):
            return
        if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():
            order = np.argsort(keys)                         # sorted once: for the search and the new level
            keys, values = keys[order], values[order]
        self._write(keys, values, *self._locate(keys, new))

    def _write(self, keys: np.ndarray, values: np.ndarray, level: np.ndarray, pos: np.ndarray) -> None:
        new = level < 0
        if not new.all():
            for i, held in enumerate(self.values):
                hit = level == i
                if hit.any():
                    if self.empty is not None:               # count the level's empty keys
                        self.holes[i] += (int(np.count_nonzero(values[hit] == self.empty))
                                          - int(np.count_nonzero(held[pos[hit]] == self.empty)))
                    held[pos[hit]] = values[hit]
        if self.empty is not None:
            new &= values != self.empty
        if not new.any():
            return
        keys, values = keys[new], values[new]
        if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():
            order = np.argsort(keys, kind="stable")
            keys, values = keys[order], values[order]
        self.keys.append(keys)
        self.values.append(values)
        self.starts.append(None)
        self.holes.append(0)
        while len(self.keys) > 1 and 2 * len(self.keys[-1]) >= len(self.keys[-2]):
            k = np.concatenate([self.keys.pop(-2), self.keys.pop()])
            v = np.concatenate([self.values.pop(-2), self.values.pop()])
            del self.starts[-2:]
            holes = self.holes.pop(-2) + self.holes.pop()
            order = np.argsort(k, kind="stable")             # two sorted runs: a merge
            k, v = k[order], v[order]
            if holes:
                keep = v != self.empty
                k, v = k[keep], v[keep]
            self.keys.append(k)
            self.values.append(v)
            self.starts.append(None)
            self.holes.append(0)

    def _starts(self, i: int) -> Optional[np.ndarray]:
        """Level ``i``'s position of the first key of each prefix ``0..top`` (``top`` its
        largest prefix + 1, ``starts[top]`` its length), if it keeps them."""
        starts = self.starts[i]
        held = self.keys[i]
        if starts is None and len(held) >= STARTS_AT and held[0] >= 0 and (held[-1] >> SHIFT) < 4 * len(held):
            counts = np.bincount(held >> SHIFT)
            starts = self.starts[i] = np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])
        return starts

    def with_prefix(self, prefixes: np.ndarray) -> np.ndarray:
        """The present keys ``(p << 32) | b`` of the distinct non-negative ``prefixes`` (unsorted).
        Cost: O(len(prefixes)) reads in the large levels (their prefixes' starts), a binary
        search per prefix in the small ones, plus the keys returned."""
        prefixes = np.asarray(prefixes, np.int64)
        if not len(prefixes):
            return np.zeros(0, np.int64)
        if len(prefixes) > 1 and not (prefixes[1:] >= prefixes[:-1]).all():
            prefixes = np.sort(prefixes)                     # sorted needles search (and read) faster
        parts = []
        for i, (held, values) in enumerate(zip(self.keys, self.values)):
            starts = self._starts(i)
            if starts is not None:
                p = np.minimum(prefixes, len(starts) - 2)
                beyond = prefixes > p                        # past the largest prefix: none
                first, end = starts[p], starts[p + 1]
                end[beyond] = first[beyond]
            else:
                lo = prefixes << SHIFT
                first, end = np.searchsorted(held, lo), np.searchsorted(held, lo + (np.int64(1) << SHIFT))
            at = expand_ranges(first, end)
            if self.empty is not None:
                at = at[values[at] != self.empty]
            parts.append(held[at])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

