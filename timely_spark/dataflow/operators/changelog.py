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

import numpy as np
import pyarrow as pa

from ...errors import ChangelogError

__all__ = ["DIFF", "diffs", "with_diffs", "without_diffs"]

#: The name of the changelog column.
DIFF = "diff"


def diffs(batch: pa.RecordBatch, operator: str) -> np.ndarray:
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
    return column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def without_diffs(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` without its ``diff`` column (unchanged if it has none)."""
    i = batch.schema.get_field_index(DIFF)
    return batch if i < 0 else batch.remove_column(i)


def with_diffs(batch: pa.RecordBatch, values: np.ndarray) -> pa.RecordBatch:
    """``batch`` with its ``diff`` column set to ``values`` (int64, appended last).

    >>> import numpy as np, pyarrow as pa
    >>> with_diffs(pa.record_batch({"x": [1]}), np.array([-1])).to_pydict()
    {'x': [1], 'diff': [-1]}
    """
    base = without_diffs(batch)
    return base.append_column(DIFF, pa.array(np.asarray(values, np.int64), pa.int64()))
