"""A spanning forest of an edge list as stars, in numpy: the local step of connected
components (each worker's edges) and of each contraction round (:mod:`.contraction`)."""

from __future__ import annotations

import numpy as np

from .compact import compact_ids

__all__ = ["forest"]


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
        differ = lx != ly
        if not differ.any():
            break
        lx, ly = lx[differ], ly[differ]
        low = np.minimum(lx, ly)
        np.minimum.at(label, lx, low)              # hook each root to the smaller root
        np.minimum.at(label, ly, low)
        _jump(label)
        x, y = x[differ], y[differ]                # settled edges stay settled
        lx, ly = label[x], label[y]
    return vertices, vertices[label]


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
