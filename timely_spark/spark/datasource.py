"""The ``"timely"`` Spark data source: Parquet event logs read as DataFrames, in batch and streaming.

``spark.read.format("timely").load(path)`` gives the data rows of a log -- ``time``,
``worker`` and the records' columns -- at complete times only (the log's own progress
proves no worker can still add to them); ``.option("complete_only", "false")`` gives
everything written so far.  A log of a changelog (record batches with a ``diff``
column) is read with its ``diff`` column; ``.option("changelog", "consolidate")`` reads
the collection the log's changes denote instead (record columns only, each row as
many times as its diffs sum to, over the complete times: the current view as of the
log's frontier; see :mod:`.log_collection`).  ``spark.readStream.format("timely").load(path)`` gives the
same rows as a stream whose offsets are the log's frontier: each micro-batch holds the
rows of the times that became complete since the last (see :mod:`.stream_reader`).

Only the log's own, checked part files are read
(:func:`timely_spark.capture.parquet.log_files`); a damaged or foreign part file is an
``EventLogError`` naming it.  The frontier is computed once per read (per micro-batch),
on the driver, from the same files the executors read, so a result is a consistent cut
of a running log (a batch DataFrame keeps the snapshot it was first planned with: load
again to see newer epochs).  The schema comes from the log's part files: ``load()``
takes the snapshot (one open of each file, checked) and the DataFrame's plans reuse it,
so no action reads a footer again.  A stream over a log with no files yet needs
``.schema(...)`` (the ``time`` column says the time type).

Register it with :func:`register` (``ts.spark.get_session`` does).  Built on PySpark's
Python Data Source API; executors read whole files into Arrow record batches, several
files per input partition (:mod:`.log_scan`).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from pyspark.sql.datasource import DataSource, DataSourceReader

from ..capture.log_index import LogIndex, LogSnapshot, local_path
from ..capture.parquet import RESERVED, EventLogError, is_changelog, not_started, read_meta
from .connect import is_connect
from .job_errors import install as install_error_translation
from .log_collection import bucket_partitions, hashable, read_collection
from .log_scan import arrow_schema, partitions, read_partition
from .stream_reader import TimelyStreamReader

__all__ = ["register", "registered", "TimelyDataSource", "COMPLETE_ONLY", "TimelyCollectionReader"]

#: Default of the ``"timely"`` data source's ``changelog`` option: ``"changes"`` reads a
#: log's change rows as they are (with ``diff`` when the log is a changelog);
#: ``"consolidate"`` reads the collection they denote as of the log's frontier.
CHANGELOG_READ = "changes"

#: The values the ``changelog`` read option takes.
CHANGELOG_READS = ("changes", "consolidate")

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
    if is_connect(spark):
        return False
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
    """``format("timely")``: options ``path``, ``complete_only`` (batch; default true) and
    ``changelog`` (batch: ``changes``, the default, or ``consolidate``)."""

    @classmethod
    def name(cls) -> str:
        """The short name: ``spark.read.format("timely")``."""
        return "timely"

    def schema(self) -> Any:
        """``time``, ``worker`` and the records' columns, from the log's part files (all
        of them checked: the snapshot is kept for :meth:`reader`)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import from_arrow_schema

        path = _path(self.options)
        try:
            snap = LogIndex(path).snapshot()
        except EventLogError as exc:
            if not not_started(path):
                raise
            raise EventLogError(f"{path}: the event log has not started yet (no part files to take its columns "
                                "from); a stream over it can start now if given its schema: "
                                "spark.readStream.format(\"timely\").schema(\"time long, worker long, <the "
                                "records' columns>\").load(path) (time is a struct for Product and tuple "
                                "times)") from exc
        self._snapshot: LogSnapshot = snap
        self._changelog = bool(snap.parts) and is_changelog(read_meta(snap.parts[0].path))
        arrow = snap.schema
        records = [f for f in arrow if f.name not in RESERVED]
        if self._consolidate():
            return from_arrow_schema(pa.schema(records))
        fields = [arrow.field("time"), pa.field("worker", pa.int64())] + records
        if self._changelog:
            fields.append(pa.field("diff", pa.int64()))
        return from_arrow_schema(pa.schema(fields))

    def _consolidate(self) -> bool:
        mode = str(self.options.get("changelog", CHANGELOG_READ)).lower()
        if mode not in CHANGELOG_READS:
            raise EventLogError(f"option changelog must be one of {', '.join(CHANGELOG_READS)}, got {mode!r}")
        return mode == "consolidate"

    def reader(self, schema: Any) -> Any:
        """A batch reader: complete times only unless ``complete_only`` is false; the
        collection with ``changelog`` ``consolidate``."""
        flag = str(self.options.get("complete_only", str(COMPLETE_ONLY))).lower()
        if flag not in ("true", "false"):
            raise EventLogError(f"option complete_only must be true or false, got {flag!r}")
        snapshot = getattr(self, "_snapshot", None)
        if self._consolidate():
            return TimelyCollectionReader(_path(self.options), schema, flag == "true", snapshot)
        return TimelyBatchReader(_path(self.options), schema, flag == "true", snapshot)

    def streamReader(self, schema: Any) -> TimelyStreamReader:
        """A stream reader: each micro-batch, the rows of the times completed since the last."""
        return TimelyStreamReader(_path(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        """The Structured Streaming sink: each micro-batch becomes the epoch of its
        batch id (see :mod:`.sink`)."""
        from .sink import TimelyStreamWriter, compact_option

        return TimelyStreamWriter(_path(self.options), schema, compact_option(self.options))


class TimelyBatchReader(DataSourceReader):
    """Reads one snapshot of the log: the rows at its complete times (or all rows)."""

    def __init__(self, path: str, schema: Any, complete_only: bool, snapshot: Optional[LogSnapshot] = None) -> None:
        self.path, self.schema, self.complete_only = path, schema, complete_only
        self._snapshot = snapshot          # the one load() took; None with a user's schema

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_snapshot"] = None          # executors get their partitions, not the log's summary
        return state

    def partitions(self) -> list:
        """The snapshot's rows, planned on the driver, in partitions of whole files."""
        snap = self._snapshot if self._snapshot is not None else LogIndex(self.path).snapshot()
        return partitions(snap.complete() if self.complete_only else snap.scans())

    def read(self, partition: Any) -> Iterator[Any]:
        """A partition's rows as Arrow record batches (an empty log's one partition has none)."""
        if not hasattr(partition, "scans"):
            return iter(())
        return read_partition(partition, arrow_schema(self.schema))


class TimelyCollectionReader(TimelyBatchReader):
    """Reads one snapshot of the log as the collection its changes denote."""

    def partitions(self) -> list:
        """As many partitions as the plain read would have, each one hash bucket of rows
        (one partition if a record column cannot be hashed)."""
        snap = self._snapshot if self._snapshot is not None else LogIndex(self.path).snapshot()
        scans = snap.complete() if self.complete_only else snap.scans()
        target = arrow_schema(self.schema)
        buckets = len(partitions(scans)) if hashable(target) else 1
        changelog = bool(snap.parts) and is_changelog(read_meta(snap.parts[0].path))
        return bucket_partitions(scans, buckets, self._source_schema(snap, target, changelog))

    @staticmethod
    def _source_schema(snap: LogSnapshot, target: Any, changelog: bool) -> Any:
        import pyarrow as pa

        fields = [snap.schema.field("time"), pa.field("worker", pa.int64()), *target]
        if changelog:
            fields.append(pa.field("diff", pa.int64()))
        return pa.schema(fields)

    def read(self, partition: Any) -> Iterator[Any]:
        """A bucket's rows of the collection as Arrow record batches."""
        return read_collection(partition, arrow_schema(self.schema))
