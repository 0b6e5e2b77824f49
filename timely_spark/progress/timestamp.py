"""Timestamps: the one place that says what each kind of time is.

Three kinds of value serve as timestamps:

* ``int`` -- totally ordered, minimum ``0`` (the usual epoch counter);
* ``tuple`` of such values -- ordered lexicographically (Python's own order),
  minimum the tuple of minima (``()`` is a timestamp with a single value);
* :class:`Product` ``(outer, inner)`` -- the *product* partial order used by
  nested loops: ``a <= b`` iff ``a.outer <= b.outer`` and ``a.inner <= b.inner``.
  The outer part may itself be a ``Product``.

For each kind a :class:`TimeKind` says its minimum, how to check a time, its order
(a ``less_equal`` and a total ``sort_key`` extending it), its path summaries
(``identity``, ``advance``), how it is stored in Arrow / Parquet (a JSON description
of the type, the Arrow type, and plain values), and how it is shown (one number to
plot).  Everything else -- antichains, summaries, the Parquet event logs, Spark's
reader, plots -- asks this module, so adding a time kind means adding one
:class:`TimeKind` here.

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

from .product import Product, less_equal, less_than, native_le
from .summary import MAX_INT, Add, ProductSummary, TupleSummary

__all__ = ["Product", "less_equal", "less_than", "minimum", "sort_key", "order_of", "check_time", "identity",
           "advance", "TimeKind", "kind_of", "describe", "kind_described", "minimum_described", "arrow_type",
           "describe_arrow", "to_plain", "from_plain", "show"]


class TimeKind:
    """What one kind of timestamp is.  Subclasses implement every method; a time's kind
    is found by :func:`kind_of`, a stored type's by :func:`kind_described`."""

    name = "?"
    #: Whether the order is total (then the least pending time blocks all later ones).
    total = True

    def matches(self, t: Any) -> bool:
        """Whether ``t`` is a time of this kind."""
        raise NotImplementedError

    def minimum(self, example: Any) -> Any:
        """The least time shaped like ``example``."""
        raise NotImplementedError

    def check(self, t: Any, like: Any) -> None:
        """Raise TypeError/ValueError unless ``t`` is a valid time shaped like ``like``."""
        raise NotImplementedError

    def sort_key(self, t: Any) -> Any:
        """A key whose total order extends the partial order."""
        raise NotImplementedError

    def order(self) -> Callable[[Any, Any], bool]:
        """The fastest ``less_equal`` for times of this kind."""
        raise NotImplementedError

    def identity(self, example: Any) -> Any:
        """The path summary that leaves times like ``example`` unchanged."""
        raise NotImplementedError

    def advance(self, example: Any, amount: int, limit: int) -> Any:
        """The summary adding ``amount`` to the innermost coordinate (results at most ``limit``)."""
        raise NotImplementedError

    def describe(self, t: Any) -> Any:
        """A JSON-able description of ``t``'s type (stored in event-log metadata)."""
        raise NotImplementedError

    def minimum_described(self, desc: Any) -> Any:
        """The least time of the described type."""
        raise NotImplementedError

    def arrow_type(self, desc: Any) -> Any:
        """The Arrow type that stores times of the described type."""
        raise NotImplementedError

    def described_by(self, arrow: Any) -> Any:
        """The description of the type an Arrow type stores, if it is this kind's; else None."""
        raise NotImplementedError

    def to_plain(self, t: Any) -> Any:
        """``t`` as a plain value of its Arrow type (an int, or a dict for a struct)."""
        raise NotImplementedError

    def from_plain(self, value: Any, desc: Any) -> Any:
        """A time from a plain value (a dict, or a Spark Row, for a struct)."""
        raise NotImplementedError

    def show(self, t: Any) -> Any:
        """One number standing for ``t`` in a plot (its first coordinate)."""
        raise NotImplementedError


def _fields(value: Any) -> dict:
    return value.asDict() if hasattr(value, "asDict") else value


def _negative(t: int) -> ValueError:
    """The error for a negative int time (whichever way it was checked)."""
    return ValueError(f"timestamp {t!r} is negative; int timestamps start at 0")


class _Int(TimeKind):
    name = "int"

    def matches(self, t: Any) -> bool:
        return isinstance(t, int) and not isinstance(t, bool)

    def minimum(self, example: Any) -> Any:
        return 0

    def check(self, t: Any, like: Any) -> None:
        if t < 0:
            raise _negative(t)

    def sort_key(self, t: Any) -> Any:
        return t

    def order(self) -> Callable[[Any, Any], bool]:
        return native_le

    def identity(self, example: Any) -> Any:
        return Add(0)

    def advance(self, example: Any, amount: int, limit: int) -> Any:
        return Add(amount, limit)

    def describe(self, t: Any) -> Any:
        return "int"

    def minimum_described(self, desc: Any) -> Any:
        return 0

    def arrow_type(self, desc: Any) -> Any:
        import pyarrow as pa

        return pa.int64()

    def described_by(self, arrow: Any) -> Any:
        import pyarrow as pa

        return "int" if pa.types.is_integer(arrow) else None

    def to_plain(self, t: Any) -> Any:
        return t

    def from_plain(self, value: Any, desc: Any) -> Any:
        return value

    def show(self, t: Any) -> Any:
        return t


class _Product(TimeKind):
    name = "product"
    total = False

    def matches(self, t: Any) -> bool:
        return type(t) is Product

    def minimum(self, example: Any) -> Any:
        return Product(minimum(example[0]), minimum(example[1]))

    def check(self, t: Any, like: Any) -> None:
        check_time(t[0], like[0])
        check_time(t[1], like[1])

    def sort_key(self, t: Any) -> Any:
        return (sort_key(t[0]), sort_key(t[1]))

    def order(self) -> Callable[[Any, Any], bool]:
        return Product.less_equal

    def identity(self, example: Any) -> Any:
        return ProductSummary(identity(example[0]), identity(example[1]))

    def advance(self, example: Any, amount: int, limit: int) -> Any:
        return ProductSummary(identity(example[0]), advance(example[1], amount, limit))

    def describe(self, t: Any) -> Any:
        return {"product": [describe(t[0]), describe(t[1])]}

    def minimum_described(self, desc: Any) -> Any:
        return Product(minimum_described(desc["product"][0]), minimum_described(desc["product"][1]))

    def arrow_type(self, desc: Any) -> Any:
        import pyarrow as pa

        return pa.struct([("outer", arrow_type(desc["product"][0])), ("inner", arrow_type(desc["product"][1]))])

    def described_by(self, arrow: Any) -> Any:
        import pyarrow as pa

        if pa.types.is_struct(arrow) and [arrow.field(i).name for i in range(arrow.num_fields)] == ["outer", "inner"]:
            return {"product": [describe_arrow(arrow.field(0).type), describe_arrow(arrow.field(1).type)]}
        return None

    def to_plain(self, t: Any) -> Any:
        return {"outer": to_plain(t[0]), "inner": to_plain(t[1])}

    def from_plain(self, value: Any, desc: Any) -> Any:
        v = _fields(value)
        return Product(from_plain(v["outer"], desc["product"][0]), from_plain(v["inner"], desc["product"][1]))

    def show(self, t: Any) -> Any:
        return show(t[0])


class _Tuple(TimeKind):
    name = "tuple"

    def matches(self, t: Any) -> bool:
        return isinstance(t, tuple) and type(t) is not Product

    def minimum(self, example: Any) -> Any:
        return tuple(minimum(x) for x in example)

    def check(self, t: Any, like: Any) -> None:
        if len(t) != len(like):
            raise TypeError(f"timestamp {t!r} has {len(t)} fields; this scope's times are like {like!r}")
        for x, y in zip(t, like):
            check_time(x, y)

    def sort_key(self, t: Any) -> Any:
        return t

    def order(self) -> Callable[[Any, Any], bool]:
        return native_le

    def identity(self, example: Any) -> Any:
        return TupleSummary(*(identity(x) for x in example))

    def advance(self, example: Any, amount: int, limit: int) -> Any:
        if not example:
            raise ValueError("the timestamp () has a single value and cannot advance")
        return TupleSummary(*(identity(x) for x in example[:-1]), advance(example[-1], amount, limit))

    def describe(self, t: Any) -> Any:
        return {"tuple": [describe(x) for x in t]}

    def minimum_described(self, desc: Any) -> Any:
        return tuple(minimum_described(d) for d in desc["tuple"])

    def arrow_type(self, desc: Any) -> Any:
        import pyarrow as pa

        return pa.struct([(f"f{i}", arrow_type(d)) for i, d in enumerate(desc["tuple"])])

    def described_by(self, arrow: Any) -> Any:
        import pyarrow as pa

        names = [arrow.field(i).name for i in range(arrow.num_fields)] if pa.types.is_struct(arrow) else None
        if names is not None and names == [f"f{i}" for i in range(len(names))]:
            return {"tuple": [describe_arrow(arrow.field(i).type) for i in range(len(names))]}
        return None

    def to_plain(self, t: Any) -> Any:
        return {f"f{i}": to_plain(x) for i, x in enumerate(t)}

    def from_plain(self, value: Any, desc: Any) -> Any:
        v = _fields(value)
        return tuple(from_plain(v[f"f{i}"], d) for i, d in enumerate(desc["tuple"]))

    def show(self, t: Any) -> Any:
        return show(t[0]) if t else 0


_KINDS: tuple[TimeKind, ...] = (_Product(), _Tuple(), _Int())
_BY_NAME = {k.name: k for k in _KINDS}


def kind_of(t: Any) -> TimeKind:
    """The :class:`TimeKind` of time ``t``; TypeError if ``t`` is no timestamp.

    >>> kind_of(3).name, kind_of((1, 2)).name, kind_of(Product(0, 0)).name
    ('int', 'tuple', 'product')
    """
    for kind in _KINDS:
        if kind.matches(t):
            return kind
    raise TypeError(f"{type(t).__name__} is not a timestamp type (int, tuple or Product)")


def kind_described(desc: Any) -> TimeKind:
    """The :class:`TimeKind` of a stored type description (see :func:`describe`)."""
    name = desc if isinstance(desc, str) else next(iter(desc))
    kind = _BY_NAME.get(name)
    if kind is None:
        raise TypeError(f"{desc!r} does not describe a timestamp type")
    return kind


# ---- the protocol as functions -------------------------------------------------------------
def minimum(example: Any) -> Any:
    """The least timestamp of the same kind (and shape) as ``example``."""
    return kind_of(example).minimum(example)


def check_time(t: Any, like: Any) -> None:
    """Raise ``TypeError`` unless ``t`` is a timestamp of the same kind as ``like``
    (``ValueError`` for a negative int)."""
    if type(t) is int and type(like) is int:    # the common case, checked at every advance_to: no kind lookup
        if t < 0:
            raise _negative(t)
        return
    if type(t) is not type(like) or isinstance(t, bool):
        raise TypeError(f"timestamp {t!r} is a {type(t).__name__}; this scope's times are like {like!r}")
    kind_of(t).check(t, like)


def sort_key(t: Any) -> Any:
    """A key whose (total, lexicographic) order extends the partial order."""
    if type(t) is Product:
        return (sort_key(t[0]), sort_key(t[1]))
    return t


def order_of(example: Any) -> Callable[[Any, Any], bool]:
    """The fastest ``less_equal`` function for timestamps like ``example``."""
    return kind_of(example).order()


def identity(example: Any) -> Any:
    """The summary that leaves timestamps like ``example`` unchanged.

    >>> identity(Product(0, 0))
    ProductSummary(Add(0), Add(0))
    """
    return kind_of(example).identity(example)


def advance(example: Any, amount: int = 1, limit: int = MAX_INT) -> Any:
    """The summary that adds ``amount`` to the innermost coordinate of times like ``example``.

    ``Product``: the inner part; tuple: the last field; int: the int itself.

    >>> advance(Product(0, 0), 1)
    ProductSummary(Add(0), Add(1))
    """
    return kind_of(example).advance(example, amount, limit)


def describe(t: Any) -> Any:
    """A JSON-able description of a timestamp's type: "int", {"product": [o, i]}, {"tuple": [...]}.

    >>> describe(Product(0, (1, 2)))
    {'product': ['int', {'tuple': ['int', 'int']}]}
    """
    return kind_of(t).describe(t)


def minimum_described(desc: Any) -> Any:
    """The least time of a described type.

    >>> minimum_described({"product": ["int", {"tuple": ["int"]}]})
    Product(0, (0,))
    """
    return kind_described(desc).minimum_described(desc)


def arrow_type(desc: Any) -> Any:
    """The Arrow type that stores times of the described type."""
    return kind_described(desc).arrow_type(desc)


def describe_arrow(arrow: Any) -> Any:
    """The description of the time type an Arrow type stores (inverse of :func:`arrow_type`).

    >>> import pyarrow as pa
    >>> describe_arrow(arrow_type({"product": ["int", "int"]}))
    {'product': ['int', 'int']}
    """
    for kind in _KINDS:
        desc = kind.described_by(arrow)
        if desc is not None:
            return desc
    raise TypeError(f"{arrow} does not store timestamps")


def to_plain(t: Any) -> Any:
    """A time as a plain value of its Arrow type (ints stay ints, structs become dicts).

    >>> to_plain(Product(1, 2))
    {'outer': 1, 'inner': 2}
    """
    return kind_of(t).to_plain(t)


def from_plain(value: Any, desc: Any) -> Any:
    """A time from its plain value (a dict or a Spark Row for a struct) and type description.

    >>> from_plain({"outer": 1, "inner": 2}, {"product": ["int", "int"]})
    Product(1, 2)
    """
    return kind_described(desc).from_plain(value, desc)


def show(t: Any) -> Any:
    """One number standing for a time in a plot: its first coordinate.

    >>> show(Product(Product(4, 1), 9)), show((2, 7)), show(5)
    (4, 2, 5)
    """
    return kind_of(t).show(t)
