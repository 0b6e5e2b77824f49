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


    def work(worker: Any) -> list:
        found: list = []
        n = table.num_rows
        lo, hi = n * worker.index // worker.peers, n * (worker.index + 1) // worker.peers
        mine = table.slice(lo, hi - lo)
        worker.dataflow(lambda s: build(s, s.to_stream(mine)).inspect(found.append))
        while worker.step():
            pass
        return found

    parts = [rb.select(schema.names).cast(schema)
             for part in execute(work, threads=workers, processes=processes, timeout=timeout) for rb in part]
    first = schema.field(0).type
    if keys == 1 and pa.types.is_integer(first) and parts:
        return _sorted_by_first(parts, schema)
    result = pa.Table.from_batches(parts, schema)
    return result.sort_by([(name, "ascending") for name in schema.names[:keys]])


def _sorted_by_first(parts: list, schema: pa.Schema) -> pa.Table:
    """The rows of the batches ``parts`` (emptied) sorted by their first (integer) column.
    Each worker's rows usually come sorted: a stable numpy sort merges those runs
    (several times faster than Arrow's sort on integers).  Column by column, each
    column's batches are let go once it is sorted, so the result and the batches are
    not both whole in memory."""
    columns: list = [pa.chunked_array([rb.column(i) for rb in parts], field.type) for i, field in enumerate(schema)]
    parts.clear()
    order = np.argsort(columns[0].to_numpy(), kind="stable")
    out = []
    for i, field in enumerate(schema):
        column, columns[i] = columns[i], None
        if (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)) and not column.null_count:
            out.append(pa.array(column.to_numpy()[order], field.type))
        else:
            out.append(column.take(pa.array(order)))
        del column
    return pa.Table.from_arrays(out, schema=schema)
