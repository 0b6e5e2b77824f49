"""Aggregation specs, shared by every columnar aggregating operator (``group_by``,
``group_by_window``): ``[(column, function), ...]`` checked against pyarrow's hash
aggregate functions, the output column each one becomes, and a table aggregated by one.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import BuildError

__all__ = ["aggregate_table", "aggregation_spec", "output_name", "output_names"]


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


def aggregate_table(table: pa.Table, keys: list[str], spec: Sequence[Any]) -> pa.Table:
    """``table`` grouped by ``keys`` and aggregated by ``spec`` (single-threaded): the
    key columns first, then one column per aggregate named as :func:`output_names`.

    >>> import pyarrow as pa
    >>> aggregate_table(pa.table({"k": ["a", "b", "a"], "x": [1, 2, 3]}), ["k"], [("x", "sum")]).to_pylist()
    [{'k': 'a', 'x_sum': 4}, {'k': 'b', 'x_sum': 2}]
    """
    grouped = table.group_by(keys, use_threads=False).aggregate(list(spec))
    return grouped.select(keys + output_names(spec))
