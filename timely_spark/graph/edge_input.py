"""What the stream forms of ``ts.graph`` read from their edge batches: edge arrays,
weights, sources, and changelog diffs -- with the errors that name the operator,
the column, the time and the row.

A stream form takes record batches of edges ``(src, dst)`` with an optional integer
``diff`` column (the changelog convention of :data:`timely_spark.dataflow.DIFF`:
``+1`` adds one copy of the edge, ``-1`` withdraws one; no ``diff`` column means
``+1`` for every row).  :func:`edge_changes` turns the batches of one completed time
into int64 numpy arrays.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..dataflow import diffs
from ..errors import ChangelogError
from .components_columnar import GraphInputError, edge_arrays
from .unique import sorted_unique
from .weights import check_weights

__all__ = ["source_vertices", "weighted_edges", "diffs_at", "withdrawn_error", "edge_changes"]


def source_vertices(sources: Any) -> np.ndarray:
    """The distinct integer ``sources`` as sorted int64; GraphInputError naming ``sources`` otherwise.

    >>> source_vertices([3, 1, 3]).tolist()
    [1, 3]
    """
    try:
        values = np.asarray(list(sources))
    except TypeError:
        raise GraphInputError(f"sources must be a list of integer vertex ids, got {sources!r}", "sources") from None
    if values.size and not np.issubdtype(values.dtype, np.integer):
        raise GraphInputError(f"sources must be integer vertex ids, got {list(sources)!r}", "sources")
    return sorted_unique(values.astype(np.int64))


def weighted_edges(batch: pa.RecordBatch, src: str, dst: str, weight: Optional[str], operator: str) -> tuple:
    """``(src, dst, weight)`` int64/int64/float64 arrays of an edge batch (weights 1.0
    without ``weight``); GraphInputError naming a missing or bad column."""
    a, c = edge_arrays(batch, src, dst, operator)
    if weight is None:
        return a, c, np.ones(len(a))
    if weight not in batch.schema.names:
        raise GraphInputError(f"{operator}: no weight column {weight!r} (columns: {', '.join(batch.schema.names)})",
                              weight)
    column = batch.column(weight)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)) or column.null_count:
        raise GraphInputError(f"{operator}: weight column {weight!r} must be numeric without nulls", weight)
    w = column.to_numpy(zero_copy_only=False).astype(np.float64)
    check_weights(w, weight, f"{operator}: ")
    return a, c, w


def withdrawn_error(operator: str, time: Any, row: str, count: int, change: int) -> ChangelogError:
    """The ChangelogError for a withdrawal of rows the collection does not hold.

    >>> str(withdrawn_error("Op", 3, "(src=1, dst=2)", 0, -1)).startswith("operator 'Op' at time 3: ")
    True
    """
    return ChangelogError(f"operator {operator!r} at time {time}: the changelog withdraws edge {row} "
                          f"{-change} time(s) but the collection holds it {count} time(s) (a withdrawal "
                          f"of a row never added)")



def diffs_at(batch: pa.RecordBatch, operator: str, time: Any) -> np.ndarray:
    """:func:`~timely_spark.dataflow.diffs` of ``batch``, its ChangelogError naming ``time`` too.

    >>> diffs_at(pa.record_batch({"x": [1], "diff": ["a"]}), "Op", 3)
    Traceback (most recent call last):
    ...
    timely_spark.errors.ChangelogError: operator 'Op' at time 3: the 'diff' column must be an integer \
(+1 adds a row, -1 withdraws one), not string
    """
    try:
        return diffs(batch, operator)
    except ChangelogError as e:
        raise ChangelogError(str(e).replace(f"operator {operator!r}", f"operator {operator!r} at time {time}",
                                            1)) from None


def edge_changes(time: Any, batches: Sequence[pa.RecordBatch], src: str, dst: str,
                 operator: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, dst, diff)`` of all rows of ``batches`` (one time's edges), as int64
    arrays, rows with diff 0 dropped.  A missing column, null or non-integer ids raise
    :class:`~timely_spark.errors.GraphInputError`; a ``diff`` column that is not an
    integer or has nulls raises :class:`~timely_spark.errors.ChangelogError`; both
    name ``operator`` (and the time, for the diff).

    >>> a, b, d = edge_changes(3, [pa.record_batch({"src": [1, 2], "dst": [2, 3], "diff": [1, -1]}),
    ...                            pa.record_batch({"src": [4], "dst": [5]})], "src", "dst", "Op")
    >>> a.tolist(), b.tolist(), d.tolist()
    ([1, 2, 4], [2, 3, 5], [1, -1, 1])
    >>> edge_changes(3, [pa.record_batch({"src": [1], "dst": [2], "diff": [0.5]})], "src", "dst", "Op")
    Traceback (most recent call last):
    ...
    timely_spark.errors.ChangelogError: operator 'Op' at time 3: the 'diff' column must be an integer \
(+1 adds a row, -1 withdraws one), not double
    """
    parts_a, parts_b, parts_d = [], [], []
    for batch in batches:
        if not batch.num_rows:
            continue
        a, b = edge_arrays(batch, src, dst, operator)
        d = diffs_at(batch, operator, time)
        parts_a.append(a)
        parts_b.append(b)
        parts_d.append(d)
    if not parts_a:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    a, b, d = np.concatenate(parts_a), np.concatenate(parts_b), np.concatenate(parts_d)
    keep = d != 0
    return (a, b, d) if keep.all() else (a[keep], b[keep], d[keep])

