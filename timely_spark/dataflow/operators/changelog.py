"""The changelog convention of columnar streams: an optional ``diff`` column.

A record batch may carry a ``diff`` column of integers: ``+1`` adds the row (the
other columns), ``-1`` withdraws one copy of it, ``+n``/``-n`` do so n times.  A batch
without ``diff`` means ``+1`` for every row.  A stream of such batches is the changelog
of a collection: the collection at time t holds each row as many times as its diffs,
summed over all times <= t, say (never negative).

Every changelog-aware operator reads and writes diffs through these helpers, so the
convention (and its checks) lives in one place.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import BuildError, ChangelogError
from ...progress import kind_of
from .key_hash import hash_columns

__all__ = ["DIFF", "diffs", "with_diffs", "without_diffs", "row_columns", "consolidate_table", "check_counts",
           "require_total_order", "with_int64_diffs"]

#: The name of the changelog column.
DIFF = "diff"


def diffs(batch: Union[pa.RecordBatch, pa.Table], operator: str) -> np.ndarray:
    """The diffs of ``batch`` as an int64 numpy array (all ones without a ``diff`` column).

    Raises :class:`~timely_spark.errors.ChangelogError` naming ``operator`` when the
    column is not an integer type or holds nulls.

    >>> import pyarrow as pa
    >>> diffs(pa.record_batch({"x": [1, 2]}), "Op").tolist()
    [1, 1]
    >>> diffs(pa.record_batch({"x": [1, 2], "diff": [1, -1]}), "Op").tolist()
    [1, -1]
    """
    i = batch.schema.get_field_index(DIFF)
    if i < 0:
        return np.ones(batch.num_rows, np.int64)
    column = batch.column(i)
    if not pa.types.is_integer(column.type):
        raise ChangelogError(f"operator {operator!r}: the {DIFF!r} column must be an integer "
                             f"(+1 adds a row, -1 withdraws one), not {column.type}")
    if column.null_count:
        raise ChangelogError(f"operator {operator!r}: the {DIFF!r} column holds "
                             f"{column.null_count} null(s); every row needs a diff")
    if column.type != pa.int64():
        try:
            column = column.cast(pa.int64())            # safe: a uint64 beyond int64 raises, not wraps
        except pa.ArrowInvalid:
            raise ChangelogError(f"operator {operator!r}: the {DIFF!r} column ({column.type}) holds values "
                                 "beyond int64") from None
    return column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def without_diffs(batch: Any) -> Any:
    """``batch`` (a RecordBatch or Table) without its ``diff`` column (unchanged if it has none).

    >>> import pyarrow as pa
    >>> without_diffs(pa.record_batch({"x": [1], "diff": [-1]})).schema.names
    ['x']
    """
    i = batch.schema.get_field_index(DIFF)
    return batch if i < 0 else batch.remove_column(i)


def with_diffs(batch: Any, values: np.ndarray) -> Any:
    """``batch`` with its ``diff`` column set to ``values`` (int64, appended last).

    >>> import numpy as np, pyarrow as pa
    >>> with_diffs(pa.record_batch({"x": [1]}), np.array([-1])).to_pydict()
    {'x': [1], 'diff': [-1]}
    """
    base = without_diffs(batch)
    return base.append_column(DIFF, pa.array(np.asarray(values, np.int64), pa.int64()))


def with_int64_diffs(batches: Sequence[Any], operator: str) -> list:
    """Each of ``batches`` with an int64 ``diff`` column last (``+1`` where it had none), so
    that batches with and without ``diff``, or with diffs of other integer types, make
    one table.

    >>> import pyarrow as pa
    >>> narrow = pa.record_batch({"diff": pa.array([-1], pa.int8()), "x": [1]})
    >>> [b.schema.names for b in with_int64_diffs([pa.record_batch({"x": [1]}), narrow], "Op")]
    [['x', 'diff'], ['x', 'diff']]
    """
    return [with_diffs(b, diffs(b, operator)) for b in batches]


def row_columns(schema: pa.Schema) -> list[str]:
    """The columns that make a row of a changelog: all but ``diff``.

    >>> import pyarrow as pa
    >>> row_columns(pa.schema([("x", pa.int64()), ("diff", pa.int64()), ("y", pa.string())]))
    ['x', 'y']
    """
    return [n for n in schema.names if n != DIFF]


def consolidate_table(table: Union[pa.Table, pa.RecordBatch], operator: str,
                      by: Optional[Sequence[str]] = None) -> pa.Table:
    """``table`` with the diffs of equal rows summed and the rows whose sum is 0 dropped.

    A row is the values of every column but ``diff`` (or of the columns ``by``, in
    that order); nulls are equal to each other here.  The result has one row per
    distinct row with a non-zero sum, in order of first appearance, and the ``diff``
    column last (int64).  Vectorized: the rows are hashed (:mod:`.key_hash`) and only
    those whose hash another row shares go through an Arrow hash aggregation (which
    compares their values), so rows that are already distinct -- most of a trace's
    merge -- cost a hash and a sort, not a grouping.

    >>> import pyarrow as pa
    >>> log = pa.table({"x": ["a", "b", "a", "b"], "diff": [1, 1, 2, -1]})
    >>> consolidate_table(log, "Consolidate").to_pydict()
    {'x': ['a'], 'diff': [3]}
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    d = diffs(table, operator)
    base = without_diffs(table)
    columns = list(base.column_names if by is None else by)
    rows = base.select(columns)
    if rows.num_rows and columns and all(_hashable(rows.column(c)) for c in columns):
        return _consolidate_hashed(rows, d)
    counted = rows.append_column("__diff", pa.array(d, pa.int64()))
    summed = counted.group_by(columns, use_threads=False).aggregate([("__diff", "sum")])
    summed = summed.filter(pc.not_equal(summed["__diff_sum"], 0))
    return summed.select(columns + ["__diff_sum"]).rename_columns(columns + [DIFF])


def _hashable(column: pa.ChunkedArray) -> bool:
    """Whether equal values of ``column`` always hash alike (:func:`.key_hash.hash_array`):
    integers, booleans, temporals, strings, binaries; floats unless they hold a NaN."""
    t = column.type
    if pa.types.is_dictionary(t):
        return False
    if pa.types.is_floating(t):
        return not pc.any(pc.is_nan(column)).as_py()
    return (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_temporal(t) or pa.types.is_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t))


def _consolidate_hashed(rows: pa.Table, d: np.ndarray) -> pa.Table:
    """:func:`consolidate_table` of ``rows`` (hashable columns) with diffs ``d``: rows whose
    hash no other row has stay as they are; the others are grouped by value, each group
    kept at its first row with the sum of its diffs."""
    h = hash_columns(rows, rows.column_names)
    ordered = np.sort(h)
    same = ordered[1:] == ordered[:-1]
    keep = d != 0
    if same.any():
        shared = np.unique(ordered[1:][same])
        candidates = np.flatnonzero(np.isin(h, shared, kind="sort"))
        grouped = rows.take(pa.array(candidates)).append_column("__i", pa.array(candidates, pa.int64())) \
                      .append_column("__diff", pa.array(d[candidates], pa.int64())) \
                      .group_by(rows.column_names, use_threads=False).aggregate([("__i", "min"), ("__diff", "sum")])
        first = grouped["__i_min"].to_numpy()
        sums = grouped["__diff_sum"].to_numpy()
        d = d.copy()
        keep[candidates] = False
        keep[first] = sums != 0
        d[first] = sums
    if not keep.all():
        rows, d = rows.filter(pa.array(keep)), d[keep]
    # One chunk, as a grouping returns: a consolidated collection leaves as one batch, not
    # one per batch it was gathered from.
    return rows.combine_chunks().append_column(DIFF, pa.array(d, pa.int64()))


def check_counts(counts: Union[pa.Table, pa.RecordBatch], operator: str, time: Any = None,
                 column: str = DIFF) -> None:
    """A :class:`~timely_spark.errors.ChangelogError` naming ``operator``, ``time`` and the
    first row whose ``column`` (its count in a collection) is negative: more copies of
    it were withdrawn than added.

    >>> import pyarrow as pa
    >>> check_counts(pa.table({"x": ["a", "b"], "diff": [1, -1]}), "Distinct", 3)
    Traceback (most recent call last):
    timely_spark.errors.ChangelogError: operator 'Distinct' at time 3: row {'x': 'b'} has count -1 (withdrawn \
more often than it was added)
    """
    values = counts.column(column)
    negative = pc.less(values, 0)
    if not pc.any(negative).as_py():
        return
    first = counts.filter(negative).slice(0, 1).to_pylist()[0]
    count = first.pop(column)
    where = f"operator {operator!r}" + ("" if time is None else f" at time {time!r}")
    raise ChangelogError(f"{where}: row {first} has count {count} (withdrawn more often than it was added)")


def require_total_order(scope: Any, operator: str) -> None:
    """A :class:`~timely_spark.errors.BuildError` naming ``operator`` unless the times of
    ``scope`` are totally ordered.  Operators that keep a collection across times
    (distinct, running aggregates and joins) fold each completed time into one state,
    which is the collection at that time only when every earlier change is at a time
    ``<=`` it: with ``Product`` times (inside ``iterative``) the change at
    ``(0, 1)`` is not ``<= (1, 0)``, and the output would not be a changelog.

    >>> import timely_spark as ts
    >>> ts.example(lambda scope: require_total_order(scope, "Distinct"))      # int epochs: fine
    >>> from types import SimpleNamespace
    >>> from timely_spark.progress import Product
    >>> require_total_order(SimpleNamespace(minimum=Product(0, 0)), "Distinct")     # a loop's scope
    Traceback (most recent call last):
    timely_spark.errors.BuildError: operator 'Distinct' keeps a collection across times, which needs \
totally ordered times (int epochs); this scope's times are Product(0, 0)-like (inside iterative?): \
use it outside the loop
    """
    least = scope.minimum
    if not kind_of(least).total:
        raise BuildError(f"operator {operator!r} keeps a collection across times, which needs totally "
                         f"ordered times (int epochs); this scope's times are {least!r}-like (inside "
                         "iterative?): use it outside the loop")
