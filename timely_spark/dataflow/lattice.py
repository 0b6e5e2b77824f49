"""Times as rows of integer coordinates, and the lattice operations on them, vectorized.

A trace keeps the time of every change beside it.  Python time objects per row would
make every comparison a Python call, so a time is flattened to its coordinates: an
``int`` is one coordinate, ``Product(outer, inner)`` is the coordinates of ``outer``
followed by those of ``inner`` (nested products flatten the same way).  The product
partial order is then the coordinate-wise order of these vectors, the lattice *join*
(least upper bound) their coordinate-wise maximum and the *meet* their minimum, all
one numpy call over an ``(n, d)`` int64 array.

Tuple times (ordered lexicographically) have no such coordinates: :func:`dimensions`
refuses them with a :class:`~timely_spark.errors.BuildError` when the operator is built.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import BuildError
from ..progress import Product

__all__ = ["dimensions", "coordinates", "from_coordinates", "coordinate_array", "times_of_array",
           "less_equal_mask", "advance_by", "join_rows"]


def coordinates(t: Any) -> tuple[int, ...]:
    """The coordinates of time ``t`` (an int or a ``Product`` of such).

    >>> coordinates(3), coordinates(Product(Product(1, 2), 5))
    ((3,), (1, 2, 5))
    """
    if type(t) is Product:
        return coordinates(t[0]) + coordinates(t[1])
    if isinstance(t, int) and not isinstance(t, bool):
        return (int(t),)
    raise BuildError(f"time {t!r} has no lattice coordinates: an incremental operator (distinct, reduce, "
                     "a running join, iterate) needs int or Product(outer, round) times, not tuples ordered "
                     "lexicographically")


def dimensions(like: Any) -> int:
    """How many coordinates times like ``like`` have.

    >>> dimensions(0), dimensions(Product(0, 0))
    (1, 2)
    """
    return len(coordinates(like))


def from_coordinates(values: Sequence[int], like: Any) -> Any:
    """The time shaped like ``like`` with these coordinates (inverse of :func:`coordinates`).

    >>> from_coordinates([1, 2, 5], Product(Product(0, 0), 0))
    Product(Product(1, 2), 5)
    """
    def build(at: int, shape: Any) -> tuple[Any, int]:
        if type(shape) is Product:
            outer, at = build(at, shape[0])
            inner, at = build(at, shape[1])
            return Product(outer, inner), at
        return int(values[at]), at + 1

    return build(0, like)[0]


def coordinate_array(times: Iterable[Any], dims: int) -> np.ndarray:
    """An ``(n, dims)`` int64 array of the coordinates of ``times``.

    >>> coordinate_array([Product(1, 2), Product(0, 7)], 2).tolist()
    [[1, 2], [0, 7]]
    """
    rows = [coordinates(t) for t in times]
    return np.array(rows, np.int64).reshape(len(rows), dims)


def times_of_array(array: np.ndarray, like: Any) -> list:
    """The times (shaped like ``like``) of the rows of an ``(n, d)`` coordinate array.

    >>> times_of_array(np.array([[1, 2]]), Product(0, 0))
    [Product(1, 2)]
    """
    return [from_coordinates(row, like) for row in np.asarray(array).tolist()]


def less_equal_mask(array: np.ndarray, t: Sequence[int]) -> np.ndarray:
    """Per row of ``array``: whether that time is ``<=`` the time with coordinates ``t``.

    >>> less_equal_mask(np.array([[0, 5], [1, 1], [2, 0]]), (1, 5)).tolist()
    [True, True, False]
    """
    return np.all(array <= np.asarray(t, np.int64), axis=1)


def join_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The lattice join (least upper bound) of two arrays of times, row by row.

    >>> join_rows(np.array([[0, 5]]), np.array([[1, 1]])).tolist()
    [[1, 5]]
    """
    return np.maximum(a, b)


def advance_by(array: np.ndarray, frontier: np.ndarray) -> np.ndarray:
    """Each time of ``array`` advanced by the antichain ``frontier`` (an ``(m, d)`` array):
    the meet over ``f`` in ``frontier`` of ``join(t, f)``.  For every time ``s`` at or
    beyond some element of the frontier, ``t <= s`` exactly when ``advance(t) <= s``:
    times the future cannot tell apart become equal, so their changes can be summed
    (differential dataflow's ``advance_by``).  An empty frontier leaves times as they are.

    >>> advance_by(np.array([[0, 3], [2, 1]]), np.array([[1, 0]])).tolist()
    [[1, 3], [2, 1]]
    >>> advance_by(np.array([[0, 0]]), np.array([[0, 2], [1, 0]])).tolist()
    [[0, 0]]
    """
    if not len(frontier) or not len(array):
        return array
    if len(frontier) == 1:
        return np.maximum(array, frontier[0])
    return np.maximum(array[:, None, :], frontier[None, :, :]).min(axis=1)
