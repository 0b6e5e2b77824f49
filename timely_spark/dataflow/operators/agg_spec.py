"""Aggregation specs, shared by every columnar aggregating operator (``group_by``,
``group_by_window``): ``[(column, function), ...]`` checked against pyarrow's hash
aggregate functions, the output column each one becomes, and a table aggregated by one.

Integer sums never wrap: Arrow's hash ``sum`` of int64 wraps silently past 2**63, so
:func:`checked_aggregate` sums each integer column a second time as float64 and raises
:class:`~timely_spark.errors.AggregateOverflow` (naming the operator, the column, the key
and the time) where the two differ by more than :data:`WRAPPED` -- a wrapped sum is off
by a multiple of 2**64, while a float64 sum of ``n`` int64 values errs by less than
``n**2 * 2**10``, far below :data:`WRAPPED` for any group of fewer than 2**26 rows.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import AggregateOverflow, BuildError

__all__ = ["aggregate_table", "aggregation_spec", "checked_aggregate", "output_name", "output_names", "WRAPPED"]

#: How far a float64 sum may be from the int64 sum of the same values before the int64
#: sum counts as wrapped (see the module's documentation).
WRAPPED = 2.0 ** 62


def aggregation_spec(aggregations: Sequence[Any], operator: str) -> list[tuple[Any, str]]:
    """``aggregations`` as a list of ``(column, function[, options])`` tuples that
    ``pyarrow.Table.group_by(...).aggregate`` takes; a BuildError naming the operator
    for anything else or a function pyarrow does not have.

    >>> aggregation_spec([("x", "sum"), ([], "count_all")], "Aggregate")
    [('x', 'sum'), ([], 'count_all')]
    >>> aggregation_spec([("x", "median_ish")], "Aggregate")
    Traceback (most recent call last):
    timely_spark.errors.BuildError: operator 'Aggregate': pyarrow has no aggregate function 'median_ish'
    """
    spec = []
    for a in aggregations:
        if not isinstance(a, (tuple, list)) or len(a) not in (2, 3):
            raise BuildError(f"operator {operator!r}: an aggregation is (column, function), got {a!r}")
        fn = a[1]
        try:
            pc.get_function(f"hash_{fn}")
        except (pa.ArrowKeyError, KeyError, ValueError):
            raise BuildError(f"operator {operator!r}: pyarrow has no aggregate function {fn!r}") from None
        spec.append(tuple(a))
    return spec


def output_name(column: Any, fn: str) -> str:
    """The output column of aggregate ``fn`` over ``column``, as pyarrow names it:
    ``<column>_<fn>``, or ``fn`` alone for an aggregate over no column (``count_all``).

    >>> output_name("price", "mean"), output_name([], "count_all")
    ('price_mean', 'count_all')
    """
    return fn if column in ([], (), None) else f"{column}_{fn}"


def output_names(spec: Sequence[Any]) -> list[str]:
    """The output column of each aggregate of a spec, in order.

    >>> output_names([("x", "sum"), ([], "count_all")])
    ['x_sum', 'count_all']
    """
    return [output_name(c, fn) for c, fn, *_ in spec]


def _column(name: str) -> str:
    return f"column {name!r}"


def checked_aggregate(table: pa.Table, keys: list[str], aggregations: Sequence[Any], operator: str,
                      time: Any = None, describe: Callable[[str], str] = _column) -> pa.Table:
    """``table.group_by(keys).aggregate(aggregations)`` (single-threaded), with every
    integer sum checked: an :class:`~timely_spark.errors.AggregateOverflow` naming
    ``operator``, ``time``, the column (as ``describe`` tells it) and the first key whose
    sum does not fit an int64, instead of a wrapped sum.

    >>> import pyarrow as pa
    >>> checked_aggregate(pa.table({"k": [1, 1], "x": [2**62, 2**62]}), ["k"], [("x", "sum")], "Sum", 3)
    Traceback (most recent call last):
    timely_spark.errors.AggregateOverflow: operator 'Sum' at time 3: the sum of column 'x' for key {'k': 1} is \
9.22337e+18, beyond int64 (integer sums do not wrap; cast to float64 or a decimal to sum larger numbers)
    """
    checks = []
    for i, (column, fn, *_) in enumerate(aggregations):
        if fn == "sum" and isinstance(column, str) and pa.types.is_integer(table.schema.field(column).type):
            twin = f"__float_sum{i}"
            table = table.append_column(twin, pc.cast(table[column], pa.float64(), safe=False))
            checks.append((column, twin))
    grouped = table.group_by(keys, use_threads=False).aggregate(list(aggregations) + [(t, "sum") for _, t in checks])
    for column, twin in checks:
        exact = grouped[f"{twin}_sum"]
        wrapped = pc.cast(grouped[f"{column}_sum"], pa.float64(), safe=False)
        off = pc.greater(pc.abs(pc.subtract(exact, wrapped)), WRAPPED)
        if pc.any(off).as_py():
            first = grouped.filter(off).slice(0, 1)
            key = {k: v for k, v in first.select(keys).to_pylist()[0].items() if not k.startswith("__")}
            where = f"operator {operator!r}" + ("" if time is None else f" at time {time!r}")
            raise AggregateOverflow(f"{where}: the sum of {describe(column)} for key {key} is "
                                    f"{first[f'{twin}_sum'][0].as_py():.6g}, beyond int64 (integer sums do not wrap; "
                                    f"cast to float64 or a decimal to sum larger numbers)")
    return grouped


def aggregate_table(table: pa.Table, keys: list[str], spec: Sequence[Any], operator: str = "Aggregate",
                    time: Any = None) -> pa.Table:
    """``table`` grouped by ``keys`` and aggregated by ``spec`` (single-threaded): the
    key columns first, then one column per aggregate named as :func:`output_names`;
    integer sums checked by :func:`checked_aggregate` (``operator`` and ``time`` name
    where one overflows).

    >>> import pyarrow as pa
    >>> aggregate_table(pa.table({"k": ["a", "b", "a"], "x": [1, 2, 3]}), ["k"], [("x", "sum")]).to_pylist()
    [{'k': 'a', 'x_sum': 4}, {'k': 'b', 'x_sum': 2}]
    """
    grouped = checked_aggregate(table, keys, spec, operator, time)
    return grouped.select(keys + output_names(spec))
