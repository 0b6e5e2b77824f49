"""Antichains: sets of mutually incomparable elements, and counted frontiers.

An :class:`Antichain` keeps only the minimal elements inserted into it; it is
the usual representation of a *frontier* (the times that may still appear) and
of a set of path summaries.  A :class:`MutableAntichain` is a multiset of times
with signed counts whose frontier is the minimal elements with positive count;
each update reports how that frontier changed.

>>> from timely_spark.progress import Product
>>> a = Antichain([Product(0, 3), Product(2, 0), Product(1, 4)])
>>> sorted(a, key=lambda t: tuple(t))
[Product(0, 3), Product(2, 0)]
>>> a.less_equal(Product(1, 4)), a.less_than(Product(2, 0)), a.less_equal(Product(1, 1))
(True, False, False)
>>> m = MutableAntichain()
>>> m.update_iter([(3, 1), (5, 2)])
[(3, 1)]
>>> m.update_iter([(3, -1)])
[(3, -1), (5, 1)]
>>> m.frontier(), m.less_than(6), m.less_equal(4)
(Antichain([5]), True, False)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional

from .product import native_le
from .timestamp import sort_key

__all__ = ["Antichain", "MutableAntichain"]

LessEqual = Callable[[Any, Any], bool]


def _order_for(x: Any) -> LessEqual:
    le = getattr(type(x), "less_equal", None)
    return le if le is not None else native_le


class Antichain:
    """The minimal elements of everything inserted, under a partial order.

    The order is the elements' own ``less_equal`` method when they have one
    (``Product``, path summaries), else Python's ``<=``.
    """

    __slots__ = ("_elements", "_le")

    def __init__(self, elements: Iterable[Any] = (), le: Optional[LessEqual] = None) -> None:
        self._elements: list[Any] = []
        self._le = le
        for e in elements:
            self.insert(e)

    def insert(self, element: Any) -> bool:
        """Add ``element`` unless some element is already ``<=`` it; True if added."""
        le = self._le
        if le is None:
            le = self._le = _order_for(element)
        elems = self._elements
        for e in elems:
            if le(e, element):
                return False
        if elems:
            self._elements = [e for e in elems if not le(element, e)]
        self._elements.append(element)
        return True

    def less_equal(self, t: Any) -> bool:
        """Whether some element is ``<= t``: ``t`` may still appear."""
        le = self._le
        for e in self._elements:
            if le(e, t):  # type: ignore[misc]
                return True
        return False

    def less_than(self, t: Any) -> bool:
        """Whether some element is ``< t`` (strictly)."""
        le = self._le
        for e in self._elements:
            if e != t and le(e, t):  # type: ignore[misc]
                return True
        return False

    def dominates(self, other: Iterable[Any]) -> bool:
        """Whether every element of ``other`` is ``>=`` some element of this antichain."""
        return all(self.less_equal(t) for t in other)

    def elements(self) -> list[Any]:
        """The elements, as a list."""
        return list(self._elements)

    def is_empty(self) -> bool:
        """Whether there is no element (an empty frontier: nothing more can come)."""
        return not self._elements

    def __iter__(self) -> Iterator[Any]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __bool__(self) -> bool:
        return bool(self._elements)

    def __contains__(self, t: object) -> bool:
        return t in self._elements

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Antichain):
            other_elems = other._elements
        elif isinstance(other, (list, tuple, set, frozenset)):
            other_elems = list(other)
        else:
            return NotImplemented
        return len(self._elements) == len(other_elems) and all(e in other_elems for e in self._elements)

    def __hash__(self) -> int:
        return hash(frozenset(self._elements))

    def __repr__(self) -> str:
        return f"Antichain({sorted(self._elements, key=_safe_key)!r})"


def _safe_key(x: Any) -> Any:
    try:
        return (0, sort_key(x))
    except Exception:  # summaries and other unordered things: stable by repr
        return (1, repr(x))


class MutableAntichain:
    """Signed counts of times; the frontier is the minimal times with positive count.

    Counts may go transiently negative (progress reports can arrive in any
    order); negative and zero counts never enter the frontier.
    """

    __slots__ = ("_counts", "_frontier", "_le", "_ints")

    def __init__(self, updates: Iterable[tuple[Any, int]] = ()) -> None:
        self._counts: dict[Any, int] = {}
        self._frontier: list[Any] = []
        self._le: Optional[LessEqual] = None
        self._ints = False               # the times are ints: a total order (see update_iter)
        self.update_iter(updates)

    def update_iter(self, updates: Iterable[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """Apply ``(time, diff)`` updates; return the changes to the frontier.

        Int times (a total order) take the path here: the frontier is the least time of
        positive count (or nothing), so it changes only when a time below it turns
        positive or its own count stops being positive, and is then found with ``min`` --
        no sort, no pairwise order.  Other times take :meth:`_update_partial`."""
        if not self._ints:
            return self._update_partial(updates)
        counts = self._counts
        frontier = self._frontier
        low = frontier[0] if frontier else None
        rebuild = False
        for t, d in updates:
            if not d:
                continue
            c = counts[t] + d if t in counts else d     # (not counts.get: no call per update)
            if c:
                counts[t] = c
            else:
                del counts[t]
            if c > 0:
                if d > 0 and (low is None or t < low):
                    rebuild = True
            elif t == low:
                rebuild = True
        if not rebuild:
            return []
        new = None
        for t in counts:                                # (keys and a subscript: no dict.items call)
            if counts[t] > 0 and (new is None or t < new):
                new = t
        if new == low:
            return []
        self._frontier = [] if new is None else [new]
        if low is None:
            return [(new, 1)]
        if new is None:
            return [(low, -1)]
        return [(low, -1), (new, 1)]

    def _update_partial(self, updates: Iterable[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """:meth:`update_iter` for times of any order (partial orders included)."""
        counts = self._counts
        frontier = self._frontier
        le = self._le
        rebuild = False
        for t, d in updates:
            if not d:
                continue
            if le is None:
                le = self._le = _order_for(t)
                self._ints = type(t) is int
            c = counts.get(t, 0) + d
            if c:
                counts[t] = c
            else:
                del counts[t]
            if rebuild:
                continue
            if d > 0:
                if c > 0:
                    for f in frontier:
                        if le(f, t):
                            break
                    else:
                        rebuild = True
            elif c <= 0 and t in frontier:
                rebuild = True
        if not rebuild:
            return []
        return self._rebuild()

    def update(self, t: Any, diff: int) -> list[tuple[Any, int]]:
        """Apply one ``(t, diff)`` update; return the frontier's changes."""
        return self.update_iter(((t, diff),))

    def _rebuild(self) -> list[tuple[Any, int]]:
        old = self._frontier
        positive = []                    # (plain loops: a comprehension is one more frame each rebuild)
        counts = self._counts
        for t in counts:
            if counts[t] > 0:
                positive.append(t)
        le = self._le
        if len(positive) <= 1:
            new = positive
        else:
            if le is native_le:          # ints, tuples: Python's own order, no key function per time
                positive.sort()
            else:
                positive.sort(key=sort_key)
            new = []
            for t in positive:  # a linear extension: no later t is below an earlier one
                for f in new:
                    if le(f, t):  # type: ignore[misc]
                        break
                else:
                    new.append(t)
        self._frontier = new
        changes = []
        for t in old:
            if t not in new:
                changes.append((t, -1))
        for t in new:
            if t not in old:
                changes.append((t, 1))
        return changes

    def frontier(self) -> Antichain:
        """The frontier as an :class:`Antichain` (a copy)."""
        return Antichain(self._frontier, le=self._le)

    def elements(self) -> list[Any]:
        """The frontier's elements, as a list."""
        return list(self._frontier)

    def less_equal(self, t: Any) -> bool:
        """Whether some frontier element is ``<= t``."""
        if self._ints:                   # (a total order: the frontier is one time or none; no order call)
            for f in self._frontier:
                return f <= t  # type: ignore[no-any-return]
            return False
        le = self._le
        for f in self._frontier:
            if le(f, t):  # type: ignore[misc]
                return True
        return False

    def less_than(self, t: Any) -> bool:
        """Whether some frontier element is ``< t``."""
        if self._ints:                   # (as in less_equal: a probe asks at every step)
            for f in self._frontier:
                return f < t  # type: ignore[no-any-return]
            return False
        le = self._le
        for f in self._frontier:
            if f != t and le(f, t):  # type: ignore[misc]
                return True
        return False

    def is_empty(self) -> bool:
        """Whether the frontier is empty."""
        return not self._frontier

    def unstable_counts(self) -> dict[Any, int]:
        """The live dict of non-zero counts (not a copy), the same object for the antichain's life.

        Unstable, for the engine's hot path (a tracker asks whether it holds anything at every run
        of its scope): read it, never change it.

        >>> m = MutableAntichain()
        >>> live = m.unstable_counts()
        >>> _ = m.update_iter([(3, 1)]); live
        {3: 1}
        """
        return self._counts

    def count_for(self, t: Any) -> int:
        """The accumulated count of time ``t``."""
        return self._counts.get(t, 0)

    def counts(self) -> dict[Any, int]:
        """All non-zero counts, as a dict (a copy)."""
        return dict(self._counts)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._frontier)

    def __len__(self) -> int:
        return len(self._frontier)

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={sorted(self._frontier, key=sort_key)!r})"
