"""The ``"timely"`` Spark data source: Parquet event logs read as DataFrames, in batch and streaming.

``spark.read.format("timely").load(path)`` gives the data rows of a log -- ``time``,
``worker`` and the records' columns -- at complete times only (the log's own progress
proves no worker can still add to them); ``.option("complete_only", "false")`` gives
everything written so far.  ``spark.readStream.format("timely").load(path)`` gives the
same rows as a stream whose offsets are the log's frontier: each micro-batch holds the
rows of the times that became complete since the last (see :mod:`.stream_reader`).

Only the log's own, checked part files are read
(:func:`timely_spark.capture.parquet.log_files`); a damaged or foreign part file is an
``EventLogError`` naming it.  The frontier is computed once per read (per micro-batch),
on the driver, from the same files the executors read, so a result is a consistent cut
of a running log (a batch DataFrame keeps the snapshot it was first planned with: load
again to see newer epochs).  The schema comes from the log's first part file; a stream over a log
with no files yet needs ``.schema(...)`` (the ``time`` column says the time type).

Register it with :func:`register` (``ts.spark.get_session`` does).  Built on PySpark's
Python Data Source API; executors read whole files into Arrow record batches, several
files per input partition (:mod:`.log_scan`).
"""

from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader

from ..capture.log_index import LogIndex, local_path
from ..capture.parquet import RESERVED, EventLogError, log_files
from .job_errors import install as install_error_translation
from .log_scan import arrow_schema, partitions, read_partition
from .stream_reader import TimelyStreamReader

__all__ = ["register", "registered", "TimelyDataSource", "COMPLETE_ONLY"]

#: Default of the ``complete_only`` option: only rows at times the log proves complete.
COMPLETE_ONLY = True



def register(spark: Any) -> None:
    """Make ``spark.read.format("timely")`` and ``spark.readStream.format("timely")``
    available in this session; a damaged log then raises ``EventLogError`` naming the
    file (see :mod:`.job_errors`), in a batch read or a streaming query.

    Idempotent and silent: a session that has the source already is left as it is
    (registering again would replace it, with a warning in Spark's log).

        ts.spark.register(spark)
        spark.read.format("timely").load("/data/clicks-log")
    """
    if not registered(spark):
        spark.dataSource.register(TimelyDataSource)
    install_error_translation()


def registered(spark: Any) -> bool:
    """Whether session ``spark`` has the ``"timely"`` data source, as its JVM says (a
    Spark Connect session cannot tell from here: False)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists(TimelyDataSource.name()))
    except Exception:       # Spark Connect: no JVM session here
        return False


def _path(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise EventLogError('format("timely") needs the event log\'s directory: .load(path)')
    return local_path(path)


class TimelyDataSource(DataSource):
    """``format("timely")``: options ``path`` and ``complete_only`` (batch; default true)."""

    @classmethod
    def name(cls) -> str:
        """The short name: ``spark.read.format("timely")``."""
        return "timely"

    def schema(self) -> Any:
        """``time``, ``worker`` and the records' columns, from the log's first part file."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import from_arrow_schema

        path = _path(self.options)
        files = log_files(path)
        if not files:
            raise EventLogError(f"{path}: the event log has no part files yet (give a stream over it .schema(...))")
        arrow = pq.read_schema(files[0])
        fields = [arrow.field("time"), pa.field("worker", pa.int64())]
        fields += [f for f in arrow if f.name not in RESERVED]
        return from_arrow_schema(pa.schema(fields))

    def reader(self, schema: Any) -> "TimelyBatchReader":
        """A batch reader: complete times only unless ``complete_only`` is false."""
        flag = str(self.options.get("complete_only", str(COMPLETE_ONLY))).lower()
        if flag not in ("true", "false"):
            raise EventLogError(f"option complete_only must be true or false, got {flag!r}")
        return TimelyBatchReader(_path(self.options), schema, flag == "true")

    def streamReader(self, schema: Any) -> TimelyStreamReader:
        """A stream reader: each micro-batch, the rows of the times completed since the last."""
        return TimelyStreamReader(_path(self.options), schema)


class TimelyBatchReader(DataSourceReader):
    """Reads one snapshot of the log: the rows at its complete times (or all rows)."""

    def __init__(self, path: str, schema: Any, complete_only: bool) -> None:
        self.path, self.schema, self.complete_only = path, schema, complete_only

    def partitions(self) -> list:
        """The snapshot's rows, planned on the driver, in partitions of whole files."""
        snap = LogIndex(self.path).snapshot()
        return partitions(snap.complete() if self.complete_only else snap.scans())

    def read(self, partition: Any) -> Iterator[Any]:
        """A partition's rows as Arrow record batches (an empty log's one partition has none)."""
        if not hasattr(partition, "scans"):
            return iter(())
        return read_partition(partition, arrow_schema(self.schema))
