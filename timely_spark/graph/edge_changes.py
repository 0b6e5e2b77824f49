"""The stream side of the graph front door: one time's changelog of edges, read and
checked once for every incremental graph operator.

A stream form of ``ts.graph`` takes record batches of edges ``(src, dst)`` with an
optional integer ``diff`` column (the changelog convention of
:data:`timely_spark.dataflow.DIFF`: ``+1`` adds one copy of the edge, ``-1``
withdraws one; no ``diff`` column means ``+1`` for every row).  :func:`edge_changes`
turns the batches of one completed time into int64 numpy arrays, with the errors
naming the operator, the column and the time.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..dataflow import diffs
from ..errors import ChangelogError
from .components_columnar import edge_arrays

__all__ = ["edge_changes"]


def edge_changes(time: Any, batches: Sequence[pa.RecordBatch], src: str, dst: str,
                 operator: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, dst, diff)`` of all rows of ``batches`` (one time's edges), as int64
    arrays, rows with diff 0 dropped.  A missing column, null or non-integer ids raise
    :class:`~timely_spark.errors.GraphInputError`; a ``diff`` column that is not an
    integer or has nulls raises :class:`~timely_spark.errors.ChangelogError`; both
    name ``operator`` (and the time, for the diff).

    >>> import pyarrow as pa
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
        try:
            d = diffs(batch, operator)
        except ChangelogError as exc:
            raise ChangelogError(str(exc).replace(f"operator {operator!r}", f"operator {operator!r} at time {time}",
                                                  1)) from None
        parts_a.append(a)
        parts_b.append(b)
        parts_d.append(d)
    if not parts_a:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    a, b, d = np.concatenate(parts_a), np.concatenate(parts_b), np.concatenate(parts_d)
    keep = d != 0
    return (a, b, d) if keep.all() else (a[keep], b[keep], d[keep])
