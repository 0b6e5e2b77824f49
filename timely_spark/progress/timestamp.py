"""Timestamps: partially ordered logical times.

Three kinds of value serve as timestamps:

* ``int`` -- totally ordered, minimum ``0`` (the usual epoch counter);
* ``tuple`` of such values -- ordered lexicographically (Python's own order),
  minimum the tuple of minima (``()`` is a timestamp with a single value);
* :class:`Product` ``(outer, inner)`` -- the *product* partial order used by
  nested loops: ``a <= b`` iff ``a.outer <= b.outer`` and ``a.inner <= b.inner``.
  The outer part may itself be a ``Product``.

Compare timestamps with :func:`less_equal` / :func:`less_than`, which respect the
partial order of every kind.  ``Product`` also overloads ``<=`` and ``<`` with the
partial order (like Python sets), so never ``sorted()`` a list of products: use
:func:`sort_key`, a total order that extends the partial order.

>>> t = Product(1, 5)
>>> less_equal(Product(0, 5), t), less_equal(Product(2, 0), t), less_equal(t, Product(2, 0))
(True, False, False)
>>> minimum(Product(Product(3, 4), 7))
Product(Product(0, 0), 0)
>>> sorted([Product(1, 0), Product(0, 2), Product(0, 1)], key=sort_key)
[Product(0, 1), Product(0, 2), Product(1, 0)]
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["Product", "less_equal", "less_than", "minimum", "sort_key", "order_of", "check_time"]


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
        return self[0]

    @property
    def inner(self) -> Any:
        return self[1]

    def less_equal(self, other: "Product") -> bool:
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


def minimum(example: Any) -> Any:
    """The least timestamp of the same kind (and shape) as ``example``."""
    if type(example) is Product:
        return Product(minimum(example[0]), minimum(example[1]))
    if isinstance(example, bool):
        raise TypeError("bool is not a timestamp type; use int")
    if isinstance(example, int):
        return 0
    if isinstance(example, tuple):
        return tuple(minimum(x) for x in example)
    raise TypeError(f"{type(example).__name__} is not a timestamp type (int, tuple or Product)")


def check_time(t: Any, like: Any) -> None:
    """Raise ``TypeError`` unless ``t`` is a timestamp of the same kind as ``like``."""
    if type(t) is not type(like) or isinstance(t, bool):
        raise TypeError(f"timestamp {t!r} is a {type(t).__name__}; this scope's times are like {like!r}")
    if type(t) is Product:
        check_time(t[0], like[0])
        check_time(t[1], like[1])
    elif isinstance(t, int):
        if t < 0:
            raise ValueError(f"timestamp {t!r} is negative; int timestamps start at 0")
    elif len(t) != len(like):
        raise TypeError(f"timestamp {t!r} has {len(t)} fields; this scope's times are like {like!r}")


def sort_key(t: Any) -> Any:
    """A key whose (total, lexicographic) order extends the partial order."""
    if type(t) is Product:
        return (sort_key(t[0]), sort_key(t[1]))
    return t


def order_of(example: Any) -> Callable[[Any, Any], bool]:
    """The fastest ``less_equal`` function for timestamps like ``example``."""
    if type(example) is Product:
        return Product.less_equal
    return _native_le


def _native_le(a: Any, b: Any) -> bool:
    return a <= b
