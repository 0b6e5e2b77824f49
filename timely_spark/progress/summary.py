"""Path summaries: what must happen to a timestamp along a path of the dataflow.

Every summary has

* ``results_in(t)`` -- the earliest time a message at ``t`` can become after the
  path, or ``None`` when no message can pass (an overflow, or a loop bound);
  it never moves a time backwards;
* ``followed_by(other)`` -- the summary of this path then ``other``, or ``None``;
* ``less_equal(other)`` -- the partial order: ``s <= o`` iff ``s(t) <= o(t)``
  for every ``t`` that ``o`` passes;
* ``advances()`` -- whether every time that passes strictly increases.

``Add(k, limit)`` acts on ints: ``t -> t + k`` while the result is at most
``limit`` (default ``2**64 - 1``, so that ints overflow as timely's ``u64`` do).
A small ``limit`` bounds a loop: ``Add(1, limit=9)`` passes at most ten rounds.
``ProductSummary(outer, inner)`` acts on each coordinate of a ``Product``;
``TupleSummary`` on each field of a lexicographic tuple.  Which summary a kind of
time uses (``identity``, ``advance``) is said in :mod:`.timestamp`.

>>> Add(1).results_in(4), Add(1, limit=4).results_in(4)
(5, None)
>>> s = ProductSummary(Add(0), Add(1))
>>> s.results_in(Product(3, 7)), s.advances(), ProductSummary(Add(0), Add(0)).advances()
(Product(3, 8), True, False)
>>> Add(2).followed_by(Add(3))
Add(5)
"""

from __future__ import annotations

from typing import Any, Optional

from .product import Product

__all__ = ["Add", "ProductSummary", "TupleSummary", "MAX_INT"]

MAX_INT = 2**64 - 1
_new_tuple = tuple.__new__   # Product(o, i) without its Python-level __new__


class Add:
    """The int summary ``t -> t + delta`` for results at most ``limit``."""

    __slots__ = ("delta", "limit")

    def __init__(self, delta: int, limit: int = MAX_INT) -> None:
        if delta < 0:
            raise ValueError(f"a path summary cannot move time backwards (delta {delta})")
        self.delta = delta
        self.limit = limit

    def results_in(self, t: int) -> Optional[int]:
        """``t + delta``, or None beyond ``limit``."""
        r = t + self.delta
        return r if r <= self.limit else None

    def followed_by(self, other: "Add") -> Optional["Add"]:
        """This summary then ``other``, or None if nothing could pass both."""
        delta = self.delta + other.delta
        limit = min(self.limit + other.delta, other.limit)
        return Add(delta, limit) if delta <= limit else None

    def less_equal(self, other: "Add") -> bool:
        """Whether this summary never yields a later time than ``other``."""
        return self.delta <= other.delta and self.limit - self.delta >= other.limit - other.delta

    def advances(self) -> bool:
        """Whether every time that passes strictly increases (``delta > 0``)."""
        return self.delta > 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Add) and self.delta == other.delta and self.limit == other.limit

    def __hash__(self) -> int:
        return hash((self.delta, self.limit))

    def __repr__(self) -> str:
        return f"Add({self.delta})" if self.limit == MAX_INT else f"Add({self.delta}, limit={self.limit})"


class ProductSummary:
    """Acts on ``Product(outer, inner)`` coordinate by coordinate."""

    __slots__ = ("outer", "inner")

    def __init__(self, outer: Any, inner: Any) -> None:
        self.outer = outer
        self.inner = inner

    def results_in(self, t: Product) -> Optional[Product]:
        """Both coordinates moved by their summaries, or None."""
        outer, inner = self.outer, self.inner
        # the loop's own summaries (outer: Add, inner: Add) inline: a round of a loop calls this once
        if type(outer) is Add:
            o = t[0] + outer.delta
            if o > outer.limit:
                return None
        else:
            o = outer.results_in(t[0])
            if o is None:
                return None
        if type(inner) is Add:
            i = t[1] + inner.delta
            if i > inner.limit:
                return None
        else:
            i = inner.results_in(t[1])
            if i is None:
                return None
        return _new_tuple(Product, (o, i))

    def followed_by(self, other: "ProductSummary") -> Optional["ProductSummary"]:
        """Coordinate by coordinate, or None."""
        o = self.outer.followed_by(other.outer)
        i = self.inner.followed_by(other.inner)
        if o is None or i is None:
            return None
        return ProductSummary(o, i)

    def less_equal(self, other: "ProductSummary") -> bool:
        """Coordinate by coordinate."""
        return self.outer.less_equal(other.outer) and self.inner.less_equal(other.inner)

    def advances(self) -> bool:
        """Whether either coordinate advances."""
        return self.outer.advances() or self.inner.advances()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProductSummary) and self.outer == other.outer and self.inner == other.inner

    def __hash__(self) -> int:
        return hash((self.outer, self.inner))

    def __repr__(self) -> str:
        return f"ProductSummary({self.outer!r}, {self.inner!r})"


class TupleSummary:
    """Acts on lexicographically ordered tuples, one summary per field."""

    __slots__ = ("fields",)

    def __init__(self, *fields: Any) -> None:
        self.fields = tuple(fields)

    def results_in(self, t: tuple) -> Optional[tuple]:
        """Every field moved by its summary, or None."""
        out = []
        for s, x in zip(self.fields, t):
            r = s.results_in(x)
            if r is None:
                return None
            out.append(r)
        return tuple(out)

    def followed_by(self, other: "TupleSummary") -> Optional["TupleSummary"]:
        """Field by field, or None."""
        out = []
        for a, b in zip(self.fields, other.fields):
            r = a.followed_by(b)
            if r is None:
                return None
            out.append(r)
        return TupleSummary(*out)

    def less_equal(self, other: "TupleSummary") -> bool:
        # Sufficient (never wrongly true): ``other`` passes no time that we do
        # not, and our increments are lexicographically no larger.
        """A sufficient test: never true when this summary could yield a later time."""
        passes = all(a.limit - a.delta >= b.limit - b.delta for a, b in zip(self.fields, other.fields))
        deltas = tuple(a.delta for a in self.fields) <= tuple(b.delta for b in other.fields)
        return passes and deltas

    def advances(self) -> bool:
        """Whether some field advances."""
        return any(s.advances() for s in self.fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TupleSummary) and self.fields == other.fields

    def __hash__(self) -> int:
        return hash(self.fields)

    def __repr__(self) -> str:
        return f"TupleSummary{self.fields!r}"
