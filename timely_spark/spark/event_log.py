"""Reading a Parquet event log with Spark: data rows, and only complete times.

A time is complete when no capturing worker's stream can still show data at it:
each worker's frontier starts at the minimum time and changes by the log's
progress rows; the log's frontier is the union of the workers' frontiers, and a
time is complete when no element of it is at or before the time.  A worker's data
for a time is always written before the progress that completes it, so rows of
complete times are all there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..capture.parquet import EventLogError, log_files, read_meta
from ..progress import Antichain, MutableAntichain, minimum, timestamp

__all__ = ["read_event_log", "event_log_frontier"]


def _time_desc(frame: Any) -> Any:
    """The log's time type, from the Spark schema of its ``time`` column."""
    from pyspark.sql.pandas.types import to_arrow_type

    return timestamp.describe_arrow(to_arrow_type(frame.schema["time"].dataType))


def _frame(spark: Any, path: str) -> tuple[Any, Any]:
    """The log's part files as a DataFrame (with the ``worker`` column), and the number
    of capturing workers (None if unknown).  On a local path only the log's own,
    checked part files are read (a stray file is ignored or named); elsewhere Spark
    lists the directory."""
    if not Path(path).exists():
        return spark.read.parquet(path), None
    files = log_files(path)
    if not files:
        raise EventLogError(f"{path}: the event log has no part files yet")
    try:
        frame = spark.read.option("basePath", path).parquet(*[str(f) for f in files])
    except Exception as exc:
        raise EventLogError(f"{path}: cannot be read as an event log ({str(exc).splitlines()[0]})") from exc
    return frame, int(read_meta(files[0])["peers"])


def _frontier(frame: Any, peers: Any) -> Antichain:
    """The frontier the progress rows of ``frame`` prove, over ``peers`` workers."""
    desc = _time_desc(frame)
    rows = frame.where("kind = 1").select("worker", "time", "diff").collect()
    streams: dict[int, list] = {}
    for r in rows:
        streams.setdefault(int(r["worker"]), []).append((timestamp.from_plain(r["time"], desc), int(r["diff"])))
    example = next((u[0][0] for u in streams.values() if u), 0)
    start = minimum(example)
    frontier = Antichain()
    workers = range(peers) if peers is not None else sorted(streams)
    for w in workers:
        counts = MutableAntichain([(start, 1)])
        counts.update_iter(streams.get(w, []))
        for t in counts.elements():
            frontier.insert(t)
    return frontier


def event_log_frontier(spark: Any, path: Any) -> Antichain:
    """The times that may still appear in the log: empty once every writer's stream ended."""
    return _frontier(*_frame(spark, str(path)))


def read_event_log(spark: Any, path: Any, complete_only: bool = True) -> Any:
    """A DataFrame of the log's data rows: ``time``, ``worker`` and the record's columns
    (``payload`` for pickled records).  With ``complete_only`` (the default), only rows
    at times the log's own progress proves complete.

        df = ts.spark.read_event_log(spark, "/data/clicks-log")
        df.groupBy("time").count().show()        # complete epochs only
    """
    from pyspark.sql import functions as F

    path = str(path)
    frame, peers = _frame(spark, path)
    missing = {"seq", "kind", "time", "diff", "worker"} - set(frame.columns)
    if missing:
        raise EventLogError(f"{path}: not a timely_spark event log (missing columns {sorted(missing)})")
    data = frame.where(F.col("kind") == 0).drop("kind", "diff", "seq")
    if not complete_only:
        return data
    frontier = _frontier(frame, peers)        # from the same files as the data: a consistent cut
    if frontier.is_empty():
        return data
    elements = list(frontier)
    if all(timestamp.kind_of(t).name == "int" for t in elements):   # totally ordered: a filter Spark pushes down
        return data.where(F.col("time") < min(elements))
    distinct = data.select("time").distinct()
    desc = _time_desc(frame)
    complete = [r for r in distinct.collect() if not frontier.less_equal(timestamp.from_plain(r["time"], desc))]
    return data.join(spark.createDataFrame(complete, distinct.schema), on="time", how="left_semi")
