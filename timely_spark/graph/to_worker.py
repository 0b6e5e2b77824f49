"""The pact that sends each row of a record batch to the worker its ``to`` column names.

A graph operator that sends the same vertices to the same owners every round
(PageRank's contributions) works out the owners once -- with the hash that
:class:`~timely_spark.dataflow.ExchangeBy` uses, :func:`~timely_spark.dataflow.destinations`
-- and sends each round's rows already split by owner: a batch whose rows all go to
one worker (its ``to`` column's minimum equals its maximum) is passed on whole, with
no hash, sort, conversion or copy per round.
"""

from __future__ import annotations

from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from ..dataflow import ExchangeBy, check_columns, split_rows

__all__ = ["ToWorker", "TO"]

#: The column naming each row's worker.
TO = "to"


class ToWorker(ExchangeBy):
    """Route each row to worker ``row[to]`` (an integer column, ``0 <= to < peers``).

    >>> import pyarrow as pa
    >>> class Pusher:
    ...     def __init__(self): self.got = []
    ...     def push(self, message): self.got.append(message[1][0].column("x").to_pylist())
    >>> to = [Pusher(), Pusher()]
    >>> push = ToWorker("Op").tee_pusher(to, 0)
    >>> push(0, [pa.record_batch({"x": [7, 8, 9], "to": [1, 0, 1]})])
    >>> [p.got for p in to]
    [[[8]], [[7, 9]]]
    """

    def __init__(self, operator: str, column: str = TO) -> None:
        super().__init__([column], operator)
        self.column = column

    def split(self, batch: pa.RecordBatch, peers: int) -> Iterable[tuple[int, pa.RecordBatch]]:
        """``(worker, rows)``: ``batch`` whole if its rows all go to one worker, else split."""
        column, operator = self.column, self.operator
        check_columns(batch, [column], operator)
        to = batch.column(column)
        bounds = pc.min_max(to)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if to.null_count or low is None or low < 0 or high >= peers:
            raise ValueError(f"operator {operator!r}: column {column!r} names workers outside "
                             f"0..{peers - 1}")
        if low == high:                       # usually: the whole batch to one worker, no copy
            return [(low, batch)]
        return split_rows(batch, to.to_numpy(zero_copy_only=False), peers)

    def __repr__(self) -> str:
        return f"ToWorker({self.column!r})"
