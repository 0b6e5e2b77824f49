"""The ``"timely"`` Spark data source: Parquet event logs read as DataFrames.

``spark.read.format("timely").load(path)`` gives the data rows of a log -- ``time``,
``worker`` and the records' columns -- at complete times only (the log's own progress
proves no worker can still add to them); ``.option("complete_only", "false")`` gives
everything written so far.  Only the log's own, checked part files are read
(:func:`timely_spark.capture.parquet.log_files`); a damaged or foreign part file is an
``EventLogError`` naming it.  The frontier is computed once, on the driver, from the
same files the executors read, so the result is a consistent cut of a running log.

Register it with :func:`register` (``ts.spark.get_session`` does).  Built on PySpark's
Python Data Source API; each part file is one input partition, read as Arrow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ..capture.parquet import RESERVED, log_files, read_meta
from ..progress import Antichain, MutableAntichain, timestamp

__all__ = ["register", "TimelyDataSource", "log_frontier"]


def register(spark: Any) -> None:
    """Make ``spark.read.format("timely")`` available in this session."""
    spark.dataSource.register(TimelyDataSource)


def log_frontier(files: list) -> tuple[Antichain, Any]:
    """The frontier the progress rows of the part files ``files`` prove (over every
    capturing worker), and the log's time type description."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    meta = read_meta(files[0])
    desc, peers = meta["time"], int(meta["peers"])
    streams: dict[int, list] = {w: [] for w in range(peers)}
    for f in files:
        table = pq.read_table(f, columns=["kind", "time", "diff"])
        progress = table.filter(pc.equal(table["kind"], 1))
        w = int(read_meta(f)["worker"])
        streams.setdefault(w, []).extend(
            (timestamp.from_plain(t, desc), d) for t, d in zip(progress["time"].to_pylist(),
                                                              progress["diff"].to_pylist()))
    start = timestamp.minimum_described(desc)
    frontier = Antichain()
    for updates in streams.values():
        counts = MutableAntichain([(start, 1)])
        counts.update_iter(updates)
        for t in counts.elements():
            frontier.insert(t)
    return frontier, desc


def _leaves(arr: Any, prefix: str = "__t") -> dict:
    """The scalar columns of a (possibly nested struct) time column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_struct(arr.type):
        return {prefix: arr}
    out: dict = {}
    for i in range(arr.type.num_fields):
        out.update(_leaves(pc.struct_field(arr, [i]), f"{prefix}_{i}"))
    return out


def _distinct_times(column: Any) -> list:
    """The distinct plain values of a time column.  Arrow has no ``unique`` for structs,
    so struct times take their distinct leaf combinations and rebuild them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_struct(column.type):
        return pc.unique(column).to_pylist()
    leaves = _leaves(column)
    distinct = pa.table(leaves).group_by(list(leaves), use_threads=False).aggregate([])
    rebuilt = pa.StructArray.from_arrays  # (one level at a time, below)
    return _rebuild(distinct, column.type, "__t", rebuilt).to_pylist()


def _rebuild(table: Any, type_: Any, prefix: str, make: Any) -> Any:
    import pyarrow as pa

    if not pa.types.is_struct(type_):
        return table[prefix].combine_chunks()
    fields = [type_.field(i) for i in range(type_.num_fields)]
    return make([_rebuild(table, f.type, f"{prefix}_{i}", make) for i, f in enumerate(fields)],
                fields=fields)


def _rows_at(data: Any, times: Any) -> Any:
    """The rows of ``data`` whose time is one of ``times``, exactly and vectorized (a
    membership test for scalar times, a semi join on the fields of struct times)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_struct(times.type):
        return data.filter(pc.is_in(data["time"], value_set=times))
    import numpy as np

    keys = _leaves(data["time"].combine_chunks())
    keyed = pa.table({**keys, "__row": pa.array(np.arange(data.num_rows))})   # Acero joins no struct payloads
    hits = keyed.join(pa.table(_leaves(times)), list(keys), join_type="left semi")["__row"]
    hits = hits.combine_chunks()
    return data.take(hits.take(pc.array_sort_indices(hits)))          # in the file's order


try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
except ImportError:  # pragma: no cover -- PySpark before 4.0
    DataSource = DataSourceReader = InputPartition = object  # type: ignore[assignment,misc]


class _File(InputPartition):  # type: ignore[misc,valid-type]
    def __init__(self, path: str, worker: int) -> None:
        self.path = path
        self.worker = worker


class TimelyDataSource(DataSource):  # type: ignore[misc,valid-type]
    """``format("timely")``: options ``path`` and ``complete_only`` (default true)."""

    @classmethod
    def name(cls) -> str:
        """The short name: ``spark.read.format("timely")``."""
        return "timely"

    def schema(self) -> Any:
        """``time``, ``worker`` and the records' columns, from the log's first part file."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import from_arrow_schema

        files = log_files(self.options["path"])
        if not files:
            from ..capture.parquet import EventLogError

            raise EventLogError(f"{self.options['path']}: the event log has no part files yet")
        arrow = pq.read_schema(files[0])
        fields = [arrow.field("time"), pa.field("worker", pa.int64())]
        fields += [f for f in arrow if f.name not in RESERVED]
        return from_arrow_schema(pa.schema(fields))

    def reader(self, schema: Any) -> "_Reader":
        """A batch reader: one partition per checked part file, complete times only."""
        return _Reader(self.options, schema)


class _Reader(DataSourceReader):  # type: ignore[misc,valid-type]
    def __init__(self, options: Any, schema: Any) -> None:
        self.path = options["path"]
        self.complete_only = str(options.get("complete_only", "true")).lower() != "false"
        self.files = [str(f) for f in log_files(self.path)]
        self.frontier_json = "null"
        if self.complete_only and self.files:
            frontier, desc = log_frontier(self.files)
            self.frontier_json = json.dumps({"desc": desc, "times": [timestamp.to_plain(t) for t in frontier]})

    def partitions(self) -> list:
        return [_File(f, int(read_meta(Path(f))["worker"])) for f in self.files]

    def read(self, partition: Any) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        table = pq.read_table(partition.path)
        data = table.filter(pc.equal(table["kind"], 0))
        complete = json.loads(self.frontier_json)
        if complete is not None and complete["times"] and data.num_rows:
            desc = complete["desc"]
            frontier = Antichain(timestamp.from_plain(t, desc) for t in complete["times"])
            distinct = _distinct_times(data["time"].combine_chunks())
            done = [v for v in distinct if not frontier.less_equal(timestamp.from_plain(v, desc))]
            data = _rows_at(data, pa.array(done, data["time"].type))
        columns = {"time": data["time"], "worker": pa.array(np.full(data.num_rows, partition.worker, np.int64))}
        for name in data.column_names:
            if name not in RESERVED:
                columns[name] = data[name]
        yield from pa.table(columns).to_batches()
