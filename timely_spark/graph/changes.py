"""Per time, a changelog of result rows with its cancelling rows removed.

The incremental graph algorithms emit ``-old``/``+new`` rows in each loop round; a
row changed twice in one epoch leaves ``+a, -a, +b`` at that epoch.  :func:`net_changes`
sums the ``diff`` of equal rows per time (after routing rows by ``key``) and drops
zeros, so an epoch emits only what differs from the previous one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..dataflow import DIFF, ExchangeBy

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["net_changes"]


def net_changes(stream: "Stream", key: str, name: str) -> "Stream":
    """Per completed time, the rows of ``stream`` with their ``diff`` summed over equal
    rows (all columns but ``diff``), zero sums dropped, rows routed by ``key``.

    >>> import pyarrow as pa, timely_spark as ts
    >>> rows = pa.table({"vertex": [1, 1, 1], "rank": [0.5, 0.5, 0.7], "diff": [1, -1, 1]})
    >>> _ = ts.example(lambda s: net_changes(s.to_stream(rows), "vertex", "Net").inspect(
    ...     lambda rb: print(rb.to_pydict())))
    {'vertex': [1], 'rank': [0.7], 'diff': [1]}
    """
    def logic(time: Any, batches: list) -> list:
        table = pa.Table.from_batches(batches)
        names = [c for c in table.column_names if c != DIFF]
        summed = table.group_by(names, use_threads=False).aggregate([(DIFF, "sum")])
        summed = summed.filter(pc.not_equal(summed[f"{DIFF}_sum"], 0))
        return pa.table({**{c: summed[c] for c in names}, DIFF: summed[f"{DIFF}_sum"]}).to_batches()

    return stream.per_time(logic, exchange=ExchangeBy([key], name), name=name)
