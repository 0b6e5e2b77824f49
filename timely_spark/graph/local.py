"""Run a graph building block over a pyarrow.Table on local workers."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa

__all__ = ["run_local"]


def run_local(table: pa.Table, build: Callable[[Any, Any], Any], schema: pa.Schema, workers: int, processes: int,
              timeout: Optional[float], keys: int = 1) -> pa.Table:
    """``build(scope, stream_of_edge_batches)`` on ``workers`` threads x ``processes``
    processes, each worker fed an even slice of ``table``; the result's batches as a
    table of ``schema`` sorted by its first ``keys`` columns (which identify a row).

    >>> from timely_spark.graph import snapshot_components
    >>> run_local(pa.table({"src": [1], "dst": [2]}), lambda s, e: snapshot_components(e),
    ...           pa.schema([("vertex", pa.int64()), ("component", pa.int64())]), 1, 1, 30).num_rows
    2
    """
    from ..execute import execute

    table = table.combine_chunks()

    def work(worker: Any) -> list:
        found: list = []
        n = table.num_rows
        lo, hi = n * worker.index // worker.peers, n * (worker.index + 1) // worker.peers
        mine = table.slice(lo, hi - lo)
        worker.dataflow(lambda s: build(s, s.to_stream(mine)).inspect(found.append))
        while worker.step():
            pass
        return found

    parts = [rb for part in execute(work, threads=workers, processes=processes, timeout=timeout) for rb in part]
    result = pa.Table.from_batches([rb.select(schema.names).cast(schema) for rb in parts], schema)
    first = schema.field(0).type
    if keys == 1 and pa.types.is_integer(first) and result.num_rows:
        # each worker's rows usually come sorted: a stable numpy sort merges those runs
        # (several times faster than Arrow's sort on integers)
        order = np.argsort(result.column(0).to_numpy(), kind="stable")
        return result.take(pa.array(order))
    return result.sort_by([(name, "ascending") for name in schema.names[:keys]])
