"""Run a TPC-H view on timely workers: the initial load at time 0, refresh ``r`` at time
``r + 1``; the view's changelog (with a ``time`` column) and the seconds each time took.

Each worker sends its share of every table's rows (a slice by worker index) at time 0
and of every refresh's changes at its time; a time's seconds run from its send to the
probe passing it (its changes to the view have all been emitted).

>>> import pyarrow as pa
>>> from timely_spark.workloads.tpch_run import run_view
>>> tables = {"lineitem": pa.table({"l_extendedprice": [10.0], "l_discount": [0.06], "l_quantity": [1.0],
...                                 "l_shipdate": pa.array([__import__("datetime").date(1994, 3, 1)])}),
...           "orders": pa.table({"o_orderkey": [1]})}
>>> view = run_view("q6", tables, [])
>>> view.changelog.select(["revenue_sum", "diff", "time"]).to_pylist()
[{'revenue_sum': 0.6, 'diff': 1, 'time': 0}]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..errors import ParameterError
from ..execute import execute
from .tpch import DYNAMIC, TPCH_QUERIES

__all__ = ["ViewRun", "run_view", "run_view_on_spark"]


@dataclass
class ViewRun:
    """The view's changelog (a ``time`` column added), the seconds of each time (0: the
    first load), and the rows emitted at each time."""

    changelog: pa.Table
    seconds: list[float]
    rows: list[int]


def _slice(table: pa.Table, index: int, peers: int) -> pa.Table:
    per = -(-len(table) // peers)
    return table.slice(index * per, per)


def _with_diff(table: pa.Table) -> pa.Table:
    if "diff" in table.column_names:
        return table
    return table.append_column("diff", pa.array(np.ones(len(table), np.int64)))


def run_view(query: str, tables: dict[str, pa.Table], refreshes: list[dict[str, pa.Table]], workers: int = 1,
             timeout: float = 1800.0) -> ViewRun:
    """Keep TPC-H view ``query`` current over the initial ``tables`` and ``refreshes``
    (changelogs of the tables :data:`~.tpch.DYNAMIC`) on ``workers`` local threads."""
    work = _work(query, lambda: tables, refreshes)
    return _gathered(execute(work, threads=workers, timeout=timeout))


def run_view_on_spark(spark: Any, query: str, directory: str, refreshes: list[dict[str, pa.Table]],
                      workers: int = 2, timeout: float = 1800.0) -> ViewRun:
    """:func:`run_view` in ``workers`` Spark barrier tasks (:func:`timely_spark.spark.run`):
    each task reads the tables from the Parquet files in ``directory`` (a path every
    executor reads, as :func:`~.tpch.read_tables` takes it) and sends its share; the
    refreshes travel in the tasks' closure."""
    from ..spark.runner import run
    from .tpch import read_tables

    work = _work(query, lambda: read_tables(directory), refreshes)
    return _gathered(run(spark, work, workers=workers, timeout=timeout))


def _work(query: str, tables: Callable[[], dict[str, pa.Table]], refreshes: list[dict[str, pa.Table]]
          ) -> Callable[[Any], tuple[list, list, list]]:
    """A worker's run of view ``query``: the tables ``tables()`` gives at time 0, refresh
    ``r`` at ``r + 1``; its output batches, seconds and rows per time."""
    if query not in TPCH_QUERIES:
        raise ParameterError(f"tpch: unknown query {query!r}; one of {', '.join(TPCH_QUERIES)}", "query")

    def work(worker: Any) -> tuple[list, list, list]:
        loads = {name: _with_diff(t) if name in DYNAMIC else t for name, t in tables().items()}
        names = list(loads)
        out: list = []

        def build(scope: Any) -> Any:
            inputs = {name: scope.new_input() for name in names}
            view = TPCH_QUERIES[query]({name: stream for name, (_, stream) in inputs.items()})
            view.inspect_time(lambda t, batch: out.append((t, batch)))
            return {name: handle for name, (handle, _) in inputs.items()}, view.probe()

        handles, probe = worker.dataflow(build)
        seconds, rows = [], []
        for t, changes in enumerate([loads, *refreshes]):
            start = time.perf_counter()
            for name, handle in handles.items():
                if name in changes:
                    handle.send_batch(_slice(changes[name], worker.index, worker.peers))
                handle.advance_to(t + 1)
            while probe.less_than(t + 1):
                worker.step()
            seconds.append(time.perf_counter() - start)
            rows.append(sum(b.num_rows for s, b in out if s == t))
        for handle in handles.values():
            handle.close()
        while worker.step():
            pass
        return out, seconds, rows
    return work


def _gathered(results: list) -> ViewRun:
    batches = [pa.Table.from_batches([b]).append_column("time", pa.array(np.full(b.num_rows, t, np.int64)))
               for out, _, _ in results for t, b in out if b.num_rows]
    changelog = pa.concat_tables(batches) if batches else pa.table({})
    seconds = np.max(np.array([s for _, s, _ in results]), axis=0).tolist()
    rows = np.sum(np.array([r for _, _, r in results]), axis=0).tolist()
    return ViewRun(changelog, seconds, rows)
