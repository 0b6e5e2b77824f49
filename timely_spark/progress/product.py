"""The Product timestamp (nested loops' times) and the order of all timestamps.

Kept apart from :mod:`.timestamp` (the protocol of time kinds) so that path summaries
can use it: :func:`less_equal` and :func:`less_than` are on every hot path.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

__all__ = ["Product", "less_equal", "less_than", "native_le"]


def less_equal(a: Any, b: Any) -> bool:
    """``a <= b`` in the partial order of ``a``'s timestamp kind."""
    if type(a) is Product:
        return a.less_equal(b)
    return a <= b


def less_than(a: Any, b: Any) -> bool:
    """``a < b`` in the partial order: ``a <= b`` and ``a != b``."""
    if type(a) is Product:
        return a != b and a.less_equal(b)
    return a < b


class Product(tuple):
    """A pair ``(outer, inner)`` ordered by the product partial order.

    ``outer`` is the time of the enclosing scope, ``inner`` the loop counter (or
    any timestamp of the nested scope).  Instances are tuples, so they hash and
    compare for equality as fast as tuples do.
    """

    __slots__ = ()

    def __new__(cls, outer: Any, inner: Any) -> "Product":
        return tuple.__new__(cls, (outer, inner))

    @property
    def outer(self) -> Any:
        """The enclosing scope's time."""
        return self[0]

    @property
    def inner(self) -> Any:
        """The nested scope's own coordinate (the loop round)."""
        return self[1]

    def less_equal(self, other: "Product") -> bool:
        """The product order: both coordinates ``<=``."""
        return less_equal(self[0], other[0]) and less_equal(self[1], other[1])

    # The partial order, for users who write ``a <= b``.
    def __le__(self, other: object) -> bool:  # type: ignore[override]
        return self.less_equal(other)  # type: ignore[arg-type]

    def __lt__(self, other: object) -> bool:  # type: ignore[override]
        return self != other and self.less_equal(other)  # type: ignore[arg-type]

    def __ge__(self, other: object) -> bool:  # type: ignore[override]
        return less_equal(other, self)

    def __gt__(self, other: object) -> bool:  # type: ignore[override]
        return self != other and less_equal(other, self)

    def __repr__(self) -> str:
        return f"Product({self[0]!r}, {self[1]!r})"

    def __reduce__(self):  # tuples of a subclass pickle through __new__
        return (Product, (self[0], self[1]))


#: Python's own ``<=``: the order of ints and lexicographic tuples (``operator.le``, a C
#: function: comparing two ints in a frontier costs no Python frame).
native_le: Callable[[Any, Any], bool] = operator.le
