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
from ..progress import Antichain, MutableAntichain, Product, minimum

__all__ = ["read_event_log", "event_log_frontier"]


def _py_time(value: Any) -> Any:
    """A time read by Spark (an int, or a Row for struct times) as a timely time."""
    if hasattr(value, "asDict"):
        d = value.asDict()
        if set(d) == {"outer", "inner"}:
            return Product(_py_time(d["outer"]), _py_time(d["inner"]))
        return tuple(_py_time(d[f"f{i}"]) for i in range(len(d)))
    return value


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
    rows = (spark.read.parquet(path).where("kind = 1").select("worker", "time", "diff").collect())
    streams: dict[int, list] = {}
    for r in rows:
        streams.setdefault(int(r["worker"]), []).append((_py_time(r["time"]), int(r["diff"])))
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
    if all(isinstance(t, int) for t in elements):
        return data.where(F.col("time") < min(elements))
    distinct = data.select("time").distinct()
    complete = [r for r in distinct.collect() if not frontier.less_equal(_py_time(r["time"]))]
    return data.join(spark.createDataFrame(complete, distinct.schema), on="time", how="left_semi")
