"""A spanning forest of an edge list as stars, in numpy: the local step of connected
components (each worker's edges) and of each contraction round (:mod:`.contraction`).

:func:`forest` takes the edges as two arrays; :func:`forest_of_batches` takes them as
a sequence of array pairs (record batches' columns) and never concatenates them: when
the ids are dense enough for an addressing table (see :mod:`.compact`), it folds
:data:`CHUNK` edges at a time into a union-find table of the id range (int32 where
the range allows), so its memory is that table plus one chunk's temporaries -- not a
copy of the edges.
"""

from __future__ import annotations

from typing import Iterator, Optional, Sequence

import numpy as np

from .compact import DIRECT_SPAN, compact_ids, offsets

__all__ = ["forest", "forest_of_batches", "forest_windows", "CHUNK", "WINDOW"]

#: Edges folded into the union-find table at a time by :func:`forest_of_batches`.
CHUNK = 1 << 17

#: Ids a piece of :func:`forest_windows` covers (its default ``window``).
WINDOW = 1 << 20


def forest(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices, component)``: every vertex of edges ``a[i]--b[i]`` (sorted) and the
    smallest vertex id in its component.

    >>> v, c = forest(np.array([1, 3, 5]), np.array([2, 2, 6]))
    >>> v.tolist(), c.tolist()
    ([1, 2, 3, 5, 6], [1, 1, 1, 5, 5])
    """
    vertices, inverse = compact_ids(np.concatenate([a, b]))
    n, m = len(vertices), len(a)
    x, y = inverse[:m], inverse[m:]
    label = np.arange(n, dtype=np.int64)           # compact ids keep the order of vertex ids
    lx, ly = x, y                                  # every vertex is its own root at first
    while True:
        differ, lx, ly = _unsettled(lx, ly)
        if not len(lx):
            break
        low = np.minimum(lx, ly)
        np.minimum.at(label, lx, low)              # hook each root to the smaller root
        np.minimum.at(label, ly, low)
        _jump(label)
        x, y = x[differ], y[differ]                # settled edges stay settled
        lx, ly = label[x], label[y]
    return vertices, vertices[label]


def forest_of_batches(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`forest` of the edges ``a[i]--b[i]`` of every ``(a, b)`` in ``pairs`` (int64
    arrays), without concatenating them when the ids are dense (the table of their
    range is at most :data:`~.compact.DIRECT_SPAN` entries an edge); sparse ids fall
    back to :func:`forest` over the concatenation.

    >>> v, c = forest_of_batches([(np.array([1, 3]), np.array([2, 2])), (np.array([5]), np.array([6]))])
    >>> v.tolist(), c.tolist()
    ([1, 2, 3, 5, 6], [1, 1, 1, 5, 5])
    """
    parts = list(forest_windows(pairs, window=1 << 62))      # one piece (a sparse fallback's: one too)
    if not parts:
        empty = np.zeros(0, np.int64)
        return empty, empty
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([v for v, _ in parts]), np.concatenate([c for _, c in parts])


def forest_windows(pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                   window: Optional[int] = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """:func:`forest_of_batches` in pieces: ``(vertices, component)`` of the vertices in
    one id range of ``window`` ids (default :data:`WINDOW`) after another (ascending,
    each piece its own arrays), so a caller that sends each piece on never holds the
    whole forest twice.

    >>> [(v.tolist(), c.tolist()) for v, c in forest_windows([(np.array([1, 3, 5]), np.array([2, 2, 6]))], 4)]
    [([1, 2, 3], [1, 1, 1]), ([5, 6], [5, 5])]
    """
    window = WINDOW if window is None else window
    pairs = [(a, b) for a, b in pairs if len(a)]
    rows = sum(len(a) for a, _ in pairs)
    if not rows:
        return
    lo = min(min(int(a.min()), int(b.min())) for a, b in pairs)
    hi = max(max(int(a.max()), int(b.max())) for a, b in pairs)
    span = hi - lo + 1
    if span > DIRECT_SPAN * rows + 1024:
        v, c = forest(np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs]))
        del pairs
        if len(v) <= window:
            yield v, c
            return
        for at in range(0, len(v), window):
            yield v[at:at + window].copy(), c[at:at + window].copy()
        return
    label = np.arange(span, dtype=np.int32 if span < 2**31 else np.int64)   # a root points at itself,
    seen = np.zeros(span, bool)                                                # others at a smaller id
    for a, b in _chunks(pairs):
        x, y = offsets(a, lo, span), offsets(b, lo, span)
        seen[x] = True
        seen[y] = True
        _union(label, x, y)
    del pairs
    for at in range(0, span, window):
        vertices = np.flatnonzero(seen[at:at + window]) + at
        if len(vertices):
            roots = _find(label, label[vertices]).astype(np.int64)
            vertices += lo
            roots += lo
            yield vertices, roots


def _chunks(pairs: list) -> "Sequence[tuple[np.ndarray, np.ndarray]]":
    """The pairs in slices of at most :data:`CHUNK` rows, small neighbours joined."""
    out: list = []
    small_a: list = []
    small_b: list = []
    held = 0
    for a, b in pairs:
        for at in range(0, len(a), CHUNK):
            sa, sb = a[at:at + CHUNK], b[at:at + CHUNK]
            if len(sa) == CHUNK:
                out.append((sa, sb))
                continue
            small_a.append(sa)
            small_b.append(sb)
            held += len(sa)
            if held >= CHUNK:
                out.append((np.concatenate(small_a), np.concatenate(small_b)))
                small_a, small_b, held = [], [], 0
    if small_a:
        out.append((np.concatenate(small_a), np.concatenate(small_b)))
    return out


def _unsettled(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(differ, a[differ], b[differ])``: the pairs whose two sides still differ."""
    differ = a != b
    return differ, a[differ], b[differ]


def _union(label: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """Join the trees of ``x[i]`` and ``y[i]`` in ``label``: each round hooks the larger
    root of every pair not yet joined to the smallest root it is paired with; pointers
    only go down, so no cycle forms."""
    rx, ry = _find(label, label[x]), _find(label, label[y])
    label[x] = rx                                  # path compression of the endpoints
    label[y] = ry
    while True:
        _, rx, ry = _unsettled(rx, ry)
        if not len(rx):
            return
        high = np.maximum(rx, ry)
        low = np.minimum(rx, ry)
        np.minimum.at(label, high, low)
        rx, ry = _find(label, low), _find(label, high)


def _find(label: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The roots of the entries ``r`` (modified in place and returned).  Each pass moves
    every entry not yet at a root two steps up and points the entry it leaves at that
    grandparent (path halving): a chain of n pointers -- a path with consecutive ids
    hooks into one in a single round of :func:`_union` -- takes O(log n) passes, not n."""
    todo = np.flatnonzero(label[r] != r)
    while len(todo):
        at = r[todo]
        up = label[label[at]]
        label[at] = up                             # pointers only go down: still in the tree
        r[todo] = up
        todo = todo[label[up] != up]
    return r


def _jump(label: np.ndarray) -> None:
    """Pointer jumping in place until every entry points at a root (an entry that
    points at itself); each pass touches only the entries not yet there."""
    parent = label[label]
    todo = np.flatnonzero(parent != label)
    while len(todo):
        label[todo] = parent[todo] if parent is not None else label[label[todo]]
        parent = None
        up = label[todo]
        todo = todo[label[up] != up]
