"""What the stream forms of ``ts.graph`` read from their edge batches: edge arrays,
weights, sources, and changelog diffs -- with the errors that name the operator,
the column, the time and the row."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pyarrow as pa

from ..dataflow import diffs
from ..errors import ChangelogError
from .components_columnar import GraphInputError, edge_arrays
from .unique import sorted_unique
from .weights import check_weights

__all__ = ["source_vertices", "weighted_edges", "diffs_at", "withdrawn_error"]


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
    """The ChangelogError for a withdrawal of rows the collection does not hold."""
    return ChangelogError(f"operator {operator!r} at time {time}: the changelog withdraws edge {row} "
                          f"{-change} time(s) but the collection holds it {count} time(s) (a withdrawal "
                          f"of a row never added)")

def diffs_at(batch: pa.RecordBatch, operator: str, time: Any) -> np.ndarray:
    """:func:`~timely_spark.dataflow.diffs` of ``batch``, its ChangelogError naming ``time`` too."""
    try:
        return diffs(batch, operator)
    except ChangelogError as e:
        raise ChangelogError(f"{e} (at time {time}, in a batch of {batch.num_rows} rows)") from None
