"""Run a graph building block over a pyarrow.Table on local workers."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa

from .compact import DIRECT_SPAN, offsets

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
    """The rows of the batches ``parts`` (emptied) sorted by their first column, integers
    that identify a row: placed by rank if they are dense (:func:`_placed`), else by a
    stable numpy sort (each worker's rows usually come sorted: it merges those runs,
    several times faster than Arrow's sort), column by column."""
    placed = _placed(parts, schema)
    if placed is not None:
        return placed
    columns: list = [pa.chunked_array([rb.column(i) for rb in parts], field.type) for i, field in enumerate(schema)]
    parts.clear()
    order = np.argsort(columns[0].to_numpy(), kind="stable")
    result = []
    for i, field in enumerate(schema):
        column, columns[i] = columns[i], None
        if _plain(field.type) and not column.null_count:
            result.append(pa.array(column.to_numpy()[order], field.type))
        else:
            result.append(column.take(pa.array(order)))
        del column
    return pa.Table.from_arrays(result, schema=schema)


def _plain(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _placed(parts: list, schema: pa.Schema) -> Optional[pa.Table]:
    """The rows sorted, if the keys are distinct and dense (an addressing table of their
    range at most ``DIRECT_SPAN`` entries a row) and every column is numeric without
    nulls: each row goes to its key's rank in the table, a batch at a time, each batch
    let go once placed -- no sort, and the batches and the result are never both whole
    in memory.  None (``parts`` untouched) otherwise."""
    if not all(_plain(f.type) for f in schema) or any(rb.column(i).null_count for rb in parts
                                                       for i in range(len(schema))):
        return None
    rows = sum(rb.num_rows for rb in parts)
    keys = [rb.column(0).to_numpy() for rb in parts if rb.num_rows]
    if not keys:
        return None
    lo, hi = min(int(k.min()) for k in keys), max(int(k.max()) for k in keys)
    span = hi - lo + 1
    if span > DIRECT_SPAN * rows + 1024 or hi >= 2**63:      # (uint64 keys: the placing works in int64)
        return None
    present = np.zeros(span, bool)
    for k in keys:
        present[offsets(k, lo, span)] = True
    del keys
    rank = np.cumsum(present, dtype=np.int32 if rows < 2**31 else np.int64)
    if int(rank[-1]) != rows:                      # keys not distinct
        return None
    first = np.flatnonzero(present) + lo
    del present
    out = [np.empty(rows, field.type.to_pandas_dtype()) for field in list(schema)[1:]]
    while parts:
        rb = parts.pop()
        at = rank[offsets(rb.column(0).to_numpy(), lo, span)] - 1
        for i, values in enumerate(out, 1):
            values[at] = rb.column(i).to_numpy()
        del rb, at
    return pa.Table.from_arrays([pa.array(first, schema.field(0).type)]
                                + [pa.array(v, f.type) for v, f in zip(out, list(schema)[1:])], schema=schema)
