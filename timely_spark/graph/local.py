"""Run a graph building block over a pyarrow.Table / pandas DataFrame on local workers."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pyarrow as pa

from .components_columnar import check_table

__all__ = ["run_local"]


def run_local(edges: Any, src: str, dst: str, build: Callable[[Any, Any], Any], schema: pa.Schema,
              workers: int, processes: int, timeout: Optional[float], extra: tuple = ()) -> Any:
    """``build(scope, stream_of_edge_batches)`` on ``workers`` threads x ``processes``
    processes, each worker fed an even slice of the edges (columns renamed to
    ``src``/``dst``); the result's batches as a table of ``schema`` sorted by its first
    column (pandas in, pandas out).

    >>> from timely_spark.graph import components
    >>> run_local(pa.table({"a": [1], "b": [2]}), "a", "b", lambda s, e: components(e),
    ...           pa.schema([("vertex", pa.int64()), ("component", pa.int64())]), 1, 1, 30).num_rows
    2
    """
    from ..execute import execute

    as_pandas = not isinstance(edges, pa.Table)
    table = pa.Table.from_pandas(edges, preserve_index=False) if as_pandas else edges
    check_table(table, src, dst)
    table = table.select([src, dst, *extra]).rename_columns(["src", "dst", *extra]).combine_chunks()

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
    result = result.sort_by([(name, "ascending") for name in schema.names[:2]])
    return result.to_pandas() if as_pandas else result
