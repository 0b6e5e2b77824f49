"""Union-find: the reference for connected components, and the contraction step of
:func:`~.connected_components.label_propagation`."""

from __future__ import annotations

from typing import Any, Hashable, Iterable

__all__ = ["find_root", "union_find"]


def find_root(parent: dict, x: Hashable) -> Any:
    """Union-find lookup with path compression (a vertex missing from ``parent`` is a root).

    >>> parent = {3: 2, 2: 1}
    >>> find_root(parent, 3), parent[3]
    (1, 1)
    """
    root = x
    while parent.get(root, root) != root:
        root = parent[root]
    while parent.get(x, x) != root:
        parent[x], x = root, parent[x]
    return root


def union_find(edges: Iterable[tuple[Any, Any]]) -> dict:
    """``{vertex: smallest vertex id in its component}`` for every vertex of ``edges``.

    >>> union_find([(1, 2), (3, 2), (5, 6)])
    {1: 1, 2: 1, 3: 1, 5: 5, 6: 5}
    """
    parent: dict = {}
    for a, b in edges:
        ra, rb = find_root(parent, a), find_root(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
        parent.setdefault(a, a)
        parent.setdefault(b, b)
    return {v: find_root(parent, v) for v in sorted(parent)}
