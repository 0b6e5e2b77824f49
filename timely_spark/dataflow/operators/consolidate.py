"""consolidate: a changelog with, per time, one row per distinct row and no zero diffs.

Rows are exchanged by the hash of all their columns but ``diff`` (:class:`ByRow`), so
equal rows meet on one worker; when a time is complete (:mod:`.per_time`) its batches
are summed with one Arrow hash aggregation (:func:`.changelog.consolidate_table`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .changelog import consolidate_table, row_columns, with_int64_diffs
from .exchange_by import ExchangeBy
from .group_by import tables_of
from .per_time import per_time

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["ByRow", "consolidate"]


class ByRow(ExchangeBy):
    """The pact that routes each row of a changelog by all of its columns but ``diff``
    (equal rows go to the same worker, whatever their diffs).

    >>> import pyarrow as pa
    >>> ByRow("Consolidate").columns(pa.record_batch({"x": [1], "diff": [1], "y": ["a"]}))
    ['x', 'y']
    """

    def __init__(self, operator: str) -> None:
        super().__init__([], operator)

    def columns(self, batch: pa.RecordBatch) -> list[str]:
        """All the columns of ``batch`` but ``diff``."""
        return row_columns(batch.schema)

    def __repr__(self) -> str:
        return "ByRow()"


def consolidate(stream: "Stream", name: str = "Consolidate") -> "Stream":
    """Per time, sum the diffs of equal rows of this changelog and drop the rows whose sum
    is 0 (a batch without ``diff`` counts +1 per row).

    Contract: the output at time t is one batch per worker with each distinct row (all
    columns but ``diff``) that has a non-zero sum of diffs at t, and ``diff`` (int64)
    last; a time whose changes cancel emits nothing.  Rows are exchanged by their hash
    so equal rows meet.  A ``diff`` that is not an integer (or null) raises
    :class:`~timely_spark.errors.ChangelogError`; batches of one time must share a schema.

    >>> import pyarrow as pa, timely_spark as ts
    >>> log = pa.table({"x": ["a", "b", "a", "b"], "diff": [1, 1, 1, -1]})
    >>> _ = ts.example(lambda s: s.to_stream(log).consolidate().inspect(lambda b: print(b.to_pydict())))
    {'x': ['a'], 'diff': [2]}
    """
    def logic(time: Any, batches: list) -> list:
        return consolidate_table(tables_of(with_int64_diffs(batches, name), name, time), name).to_batches()

    return per_time(stream, logic, exchange=ByRow(name), name=name)
