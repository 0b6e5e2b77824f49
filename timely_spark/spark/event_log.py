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

from ..capture.parquet import EventLogError, read_meta, worker_dirs
from ..progress import Antichain, MutableAntichain, minimum, timestamp

__all__ = ["read_event_log", "event_log_frontier"]


def _time_desc(frame: Any) -> Any:
    """The log's time type, from the Spark schema of its ``time`` column."""
    from pyspark.sql.pandas.types import to_arrow_type

    return timestamp.describe_arrow(to_arrow_type(frame.schema["time"].dataType))


def _peers(path: str) -> int:
    """How many workers captured the log (from a file's metadata when it is local)."""
    dirs = worker_dirs(path)
    for d in dirs:
        parts = sorted(d.glob("part-*.parquet"))
        if parts:
            return int(read_meta(parts[0])["peers"])
    return len(dirs)


def event_log_frontier(spark: Any, path: Any) -> Antichain:
    """The times that may still appear in the log: empty once every writer's stream ended."""
    path = str(path)
    peers = _peers(path) if Path(path).exists() else None
    frame = spark.read.parquet(path)
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


def read_event_log(spark: Any, path: Any, complete_only: bool = True) -> Any:
    """A DataFrame of the log's data rows: ``time``, ``worker`` and the record's columns
    (``payload`` for pickled records).  With ``complete_only`` (the default), only rows
    at times the log's own progress proves complete.

        df = ts.spark.read_event_log(spark, "/data/clicks-log")
        df.groupBy("time").count().show()        # complete epochs only
    """
    from pyspark.sql import functions as F

    path = str(path)
    try:
        frame = spark.read.parquet(path)
    except Exception as exc:
        raise EventLogError(f"{path}: cannot be read as an event log ({str(exc).splitlines()[0]})") from exc
    missing = {"seq", "kind", "time", "diff", "worker"} - set(frame.columns)
    if missing:
        raise EventLogError(f"{path}: not a timely_spark event log (missing columns {sorted(missing)})")
    data = frame.where(F.col("kind") == 0).drop("kind", "diff", "seq")
    if not complete_only:
        return data
    frontier = event_log_frontier(spark, path)
    if frontier.is_empty():
        return data
    elements = list(frontier)
    if all(timestamp.kind_of(t).name == "int" for t in elements):   # totally ordered: a filter Spark pushes down
        return data.where(F.col("time") < min(elements))
    distinct = data.select("time").distinct()
    desc = _time_desc(frame)
    complete = [r for r in distinct.collect() if not frontier.less_equal(timestamp.from_plain(r["time"], desc))]
    return data.join(spark.createDataFrame(complete, distinct.schema), on="time", how="left_semi")
