"""Reading a Parquet event log with Spark: data rows, and only complete times.

Both functions are the ``"timely"`` data source's reader (:mod:`.datasource`) seen from
Python: ``read_event_log`` is ``spark.read.format("timely").load(path)``, whose ``load``
checks every file (once), so a damaged, foreign or missing file is raised here as
``EventLogError`` naming it; ``event_log_frontier`` is the frontier a read would use.

A time is complete when no capturing worker's stream can still show data at it:
each worker's frontier starts at the minimum time and changes by the log's
progress rows; the log's frontier is the union of the workers' frontiers, and a
time is complete when no element of it is at or before the time.
"""

from __future__ import annotations

from typing import Any

from ..capture.log_index import LogIndex, local_path
from ..progress import Antichain
from .datasource import register

__all__ = ["read_event_log", "event_log_frontier"]


def event_log_frontier(spark: Any, path: Any) -> Antichain:
    """The times that may still appear in the log: empty once every writer's stream ended.

        ts.spark.event_log_frontier(spark, "/data/clicks-log")   # Antichain([7]): epochs 0..6 are complete
    """
    return LogIndex(local_path(path)).snapshot().frontier


def read_event_log(spark: Any, path: Any, complete_only: bool = True) -> Any:
    """A DataFrame of the log's data rows: ``time``, ``worker`` and the record's columns
    (``payload`` for pickled records).  With ``complete_only`` (the default), only rows
    at times the log's own progress proves complete.  The same as
    ``spark.read.format("timely").option("complete_only", ...).load(path)``, but a bad
    log raises ``EventLogError`` here, not later in a Spark action.

        df = ts.spark.read_event_log(spark, "/data/clicks-log")
        df.groupBy("time").count().show()        # complete epochs only
    """
    register(spark)
    return spark.read.format("timely").option("complete_only", str(bool(complete_only)).lower()) \
        .load(local_path(path))
